"""``mol engine``: serve a model engine (``scripted`` is the test double of
docs/scripted-engine.md), print the vLLM or SGLang command that serves an artifact, or
``check`` that the engine serves the artifact's adapters."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any

from mol.cli.commands.common import add_hcp_argument
from mol.core.errors import UsageError

_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``mol engine`` subcommands."""
    sub = parser.add_subparsers(dest="engine_command", metavar="SUBCOMMAND", required=True)

    p = sub.add_parser(
        "scripted",
        help="serve a TOML script over the OpenAI Chat Completions protocol (test double)",
        description="Answer chat completions from a script of rules per adapter; "
                    "see docs/scripted-engine.md. Stops on SIGINT or SIGTERM.",
    )
    p.add_argument("--script", type=Path, required=True, metavar="FILE", help="the TOML script")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0 picks a free one)")
    p.add_argument("--log", type=Path, metavar="FILE",
                   help="append every request received to FILE, one JSON object a line")
    p.add_argument("--latency", type=float, default=0.0, metavar="SEC",
                   help="seconds to wait before answering every request, before a streamed "
                   "answer's first chunk (default: 0)")
    p.add_argument("--route-latency", type=float, metavar="SEC",
                   help="seconds a constrained (routing) request waits instead of --latency")
    p.add_argument("--reasoning-parser", choices=("reasoning_content", "reasoning"),
                   metavar="FIELD", help="answer like a reasoning model behind a reasoning "
                   "parser filling FIELD (reasoning_content or reasoning): replies go there "
                   "unless the request turns thinking off")
    p.add_argument("--seed", type=int, default=0, help="seed of the stochastic rules (p = ...; "
                   "default 0)")
    p.add_argument("--context-window", type=int, metavar="N",
                   help="every adapter's context window, in tokens: a longer request is refused "
                   "with vLLM's 400, and /v1/models reports max_model_len = N")
    p.add_argument("--lora-api", choices=("vllm", "sglang"),
                   help="load LoRAs at runtime as this engine does (vLLM's /v1/load_lora_adapter "
                   "or SGLang's /load_lora_adapter), listing them in /v1/models")
    p.add_argument("--no-runtime-lora-updating", dest="runtime_lora_updating",
                   action="store_false", help="with --lora-api vllm: no load routes, as vLLM "
                   "without VLLM_ALLOW_RUNTIME_LORA_UPDATING; sglang: as without --enable-lora")
    p.add_argument("--base", default="scripted-base", metavar="ID",
                   help="the base model's id, the parent of loaded LoRAs (default: scripted-base)")
    p.add_argument("--served", metavar="NAMES", help="comma-separated model names to list in "
                   "/v1/models and answer (default: the script's adapters and L0,L1,L2,L3)")
    p.add_argument("-q", "--quiet", action="store_true", help="do not print a line per request")
    p.set_defaults(func=scripted)

    p = sub.add_parser(
        "local",
        help="serve a small real model as L0-L3 on loopback (llama.cpp; the 'local' extra)",
        description="Serve a GGUF model (default: SmolLM2-135M-Instruct) as the adapters "
                    "L0-L3 with llama.cpp; see docs/local-engine.md. Stops on SIGINT or SIGTERM.",
    )
    p.add_argument("--port", type=int, default=8080, help="loopback port (default: 8080; 0: free)")
    p.add_argument("--model", type=Path, metavar="GGUF", help="model file (default: SmolLM2-135M)")
    p.add_argument("--lora", action="append", default=[], metavar="L1=PATH",
                   help="a LoRA file for one adapter (repeatable)")
    p.set_defaults(func=local)
    _configure_command(sub)
    _configure_check(sub)


def _configure_check(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check", help="check that the engine serves the artifact's adapters",
        description="Read the engine's GET /v1/models and check each adapter of the HCP: "
                    "ok, missing (its engine name, versioned for a LoRA, is not listed) or "
                    "foreign (a LoRA the engine serves on another base than [model] base). "
                    "Exits 1 on any problem; see docs/adapters.md.")
    add_hcp_argument(p)
    p.add_argument("--engine-url", help="engine base URL, overriding the artifact's "
                   "engine.api_base (also $MOL_ENGINE_URL)")
    p.set_defaults(func=check)


def _configure_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "command",
        help="print the vLLM or SGLang command serving an artifact's base model and LoRAs",
        description="Print the engine's launch command from the artifact: its base model, "
                    "every adapter's LoRA under its versioned name, the LoRA limits, host "
                    "and port from engine.api_base, [engine] launch's parsers and arguments; "
                    "see docs/adapters.md. --check verifies the files it names instead.",
    )
    p.add_argument("--hcp", type=Path, required=True, metavar="FILE", help="the artifact")
    p.add_argument("--engine", choices=("vllm", "sglang"),
                   help="the engine (default: engine.lora_api when it is vllm or sglang)")
    p.add_argument("--model-root", type=Path, metavar="DIR",
                   help="folder the base model ([model] base) and relative LoRA paths lie "
                   "under on the engine's machine (default: LoRAs relative to the artifact, "
                   "the base as written)")
    p.add_argument("--max-lora-rank", type=int, metavar="R",
                   help="the largest LoRA rank (default: read from each LoRA's "
                   "adapter_config.json, 16 for one mol cannot read)")
    p.add_argument("--check", action="store_true",
                   help="check that the base folder and every LoRA exist and that each LoRA's "
                   "content matches its sha256; one line per problem, exit 1 on any")
    p.set_defaults(func=command)


def scripted(args: argparse.Namespace) -> int:
    """Serve the script until SIGINT or SIGTERM, then shut down cleanly (exit 0)."""
    from mol.runtime.testing import ScriptedEngine

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be between 0 and 65535, got {args.port}")
    if not args.script.is_file():
        raise UsageError(f"--script {args.script}: no such file")
    on_request = None if args.quiet else _print_request
    engine = ScriptedEngine(args.script, log_path=args.log, host=args.host, port=args.port,
                            latency=args.latency, on_request=on_request,
                            reasoning_parser=args.reasoning_parser, seed=args.seed,
                            context_window=args.context_window,
                            route_latency=args.route_latency, lora_api=args.lora_api,
                            runtime_lora_updating=args.runtime_lora_updating, base=args.base,
                            served=_names(args.served) if args.served is not None else None)
    # Block the stop signals before the server thread starts (threads inherit
    # the mask), so they reach the sigwait below rather than interrupting uvicorn.
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        with engine:
            log = f", logging requests to {args.log}" if args.log else ""
            print(f"mol engine scripted: serving {', '.join(engine.served)} at "
                  f"{engine.base_url}{log}", file=sys.stderr, flush=True)
            received = signal.sigwait(_STOP_SIGNALS)
            print(f"mol engine scripted: {signal.Signals(received).name}, shutting down",
                  file=sys.stderr, flush=True)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    return 0


async def check(args: argparse.Namespace) -> int:
    """One line per adapter (ok, missing, foreign); 1 on any problem."""
    from mol.cli.commands.common import load_artifact
    from mol.runtime import LiteLLMEngine, check_adapters

    artifact = load_artifact(args.hcp)
    engine = LiteLLMEngine.from_artifact(artifact, args.engine_url)
    found = await check_adapters(artifact, engine.api_base, api_key=engine.api_key)
    for state in found.states:
        print(state.line(), flush=True)
    if found.problems:
        print(f"mol engine check: {len(found.problems)} of {len(found.states)} adapters not "
              f"served as the artifact asks by {found.url}", file=sys.stderr)
        return 1
    return 0


def _names(text: str) -> list[str]:
    """A comma-separated list of names (``--served``)."""
    return [name.strip() for name in text.split(",") if name.strip()]


async def local(args: argparse.Namespace) -> int:
    """Serve the local engine until SIGINT or SIGTERM; print its address on stdout."""
    from mol.runtime.llamacpp.supervisor import LocalEngineConfig, parse_lora, serve_until_stopped

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be between 0 and 65535, got {args.port}")
    loras = dict(parse_lora(spec) for spec in args.lora)
    await serve_until_stopped(LocalEngineConfig(port=args.port, model=args.model, loras=loras))
    return 0


def command(args: argparse.Namespace) -> int:
    """Print the launch command (notes on stderr), or with ``--check`` the problems with the
    files it names (exit 1) or ``ok``."""
    from mol.hcp.launch import command as launch_command
    from mol.hcp.launchcheck import check
    from mol.hcp.loader import load

    artifact = load(args.hcp)
    root = args.model_root.expanduser().absolute() if args.model_root else None
    if args.check:
        found = check(artifact, root)
        for note in found.notes:
            print(f"mol engine command: {note}", file=sys.stderr)
        print("\n".join(found.problems) if found.problems else "ok")
        return 1 if found.problems else 0
    engine = args.engine or artifact.doc.engine.lora_api
    if engine not in ("vllm", "sglang"):
        raise UsageError("give --engine vllm or --engine sglang (the artifact's engine.lora_api "
                         f"is {engine!r})")
    if args.max_lora_rank is not None and args.max_lora_rank < 1:
        raise UsageError(f"--max-lora-rank must be at least 1, got {args.max_lora_rank}")
    launch = launch_command(artifact, engine, root, args.max_lora_rank)
    for note in launch.notes:
        print(f"mol engine command: {note}", file=sys.stderr)
    print(launch.line())
    return 0


def _print_request(record: dict[str, Any]) -> None:
    """One progress line per request: sequence, adapter, rule, status (and the error if any)."""
    rule = f"[{record['rule']}]" if record["rule"] is not None else ""
    path = f" {record['path']}" if "path" in record else ""  # a LoRA load or unload
    line = f"  #{record['seq']}{path} {record['adapter'] or '?'}{rule} -> {record['status']}"
    if record.get("error"):
        line += f": {record['error']}"
    print(line, file=sys.stderr, flush=True)
