"""The engine's launch command from an artifact (``mol engine command``): vLLM or SGLang
serving the artifact's base model with every adapter's LoRA under its versioned engine name.

Where the engine reads a file: ``--model-root`` given, a relative path (``[model].base``, a
LoRA's ``path``) lies under it, as on the engine's machine; not given, a LoRA lies where
the artifact's loader found it (relative to the artifact) and the base is passed as written
(a folder, or a name the engine resolves). Flags are those of vLLM 0.24 and SGLang 0.5.13
(docs/adapters.md, "Launching the engine").
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mol.core.errors import UsageError
from mol.hcp import loras

ENGINES = ("vllm", "sglang")
"""The engines ``mol engine command`` launches."""

VLLM_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The values vLLM's ``--max-lora-rank`` accepts (its ``MaxLoRARanks``)."""

DEFAULT_RANK = 16
"""The rank assumed for a LoRA whose ``adapter_config.json`` mol cannot read (vLLM's default
``--max-lora-rank``)."""

RUNTIME_UPDATES = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"
"""vLLM's switch for ``/v1/load_lora_adapter`` and ``/v1/unload_lora_adapter``."""


@dataclass(frozen=True)
class LoraSite:
    """One LoRA the engine loads: its versioned name and where the engine reads it."""

    adapter: str
    """The (first) adapter served by it."""
    engine_name: str
    """``NAME@<12 hex>``: what the engine serves it as."""
    written: str
    """Its ``path`` as the artifact gives it."""
    path: str
    """Where the engine reads it: an absolute path, or the URI as written."""
    sha256: str
    """Its content hash (given by the artifact or computed at load)."""

    @property
    def local(self) -> Path | None:
        """The path on this machine, None for a URI."""
        return None if loras.is_uri(self.path) else Path(self.path)


@dataclass(frozen=True)
class Launch:
    """A launch command: environment assignments and arguments, and notes on the choices
    mol made for want of facts (printed apart from the command)."""

    env: dict[str, str]
    argv: list[str]
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        """One shell-quoted line, environment assignments first."""
        return shlex.join([f"{key}={value}" for key, value in self.env.items()] + self.argv)


def base_path(doc: Any, model_root: Path | None) -> str:
    """Where the engine reads the base model: ``[model].base`` under ``model_root``, or as
    written."""
    if not doc.model.base:
        raise UsageError("the artifact names no base model: set [model] base (a folder under "
                         "--model-root, a path, or a name the engine resolves)")
    if model_root is None:
        return doc.model.base
    return os.path.normpath(model_root / Path(doc.model.base).expanduser())


def lora_sites(artifact: Any, model_root: Path | None) -> list[LoraSite]:
    """The distinct LoRAs of the artifact's adapters, in adapter-name order."""
    doc = artifact.doc
    sites: dict[str, LoraSite] = {}
    for name in doc.adapter_names:
        lora = doc.adapters[name].lora
        if lora is None:
            continue
        engine_name = doc.engine_name(name)
        if engine_name not in sites:
            sites[engine_name] = LoraSite(name, engine_name, lora.path,
                                          _engine_path(artifact.base_dir, lora.path, model_root),
                                          lora.sha256 or "")
    return list(sites.values())


def _engine_path(base_dir: Path, path: str, model_root: Path | None) -> str:
    if loras.is_uri(path):
        return path
    if model_root is None:
        return str(loras.local_path(base_dir, path))
    return os.path.normpath(model_root / Path(path).expanduser())


def peft_rank(folder: Path) -> int | None:
    """The largest rank of a PEFT LoRA folder: ``r`` and the ``rank_pattern`` overrides of
    its ``adapter_config.json``; None when there is none to read (a file, a URI, absent)."""
    config = folder / "adapter_config.json"
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    ranks = [data.get("r")]
    if isinstance(data.get("rank_pattern"), dict):
        ranks += list(data["rank_pattern"].values())
    ranks = [r for r in ranks if isinstance(r, int) and not isinstance(r, bool) and r > 0]
    return max(ranks) if ranks else None


def max_rank(sites: list[LoraSite], given: int | None, engine: str) -> tuple[int, list[str]]:
    """The ``--max-lora-rank``: ``given``, else the largest rank read from the LoRAs (an
    unreadable one counts as ``DEFAULT_RANK``, said in a note); vLLM's rounded up to the
    next value it accepts."""
    notes: list[str] = []
    read: dict[str, int] = {}
    unread: list[str] = []
    for site in sites:
        rank = peft_rank(site.local) if site.local is not None else None
        if rank is None:
            unread.append(site.adapter)
        else:
            read[site.adapter] = rank
    if given is not None:
        over = {name: rank for name, rank in read.items() if rank > given}
        if over:
            name, rank = max(over.items(), key=lambda item: item[1])
            raise UsageError(f"--max-lora-rank {given} is below {name}'s LoRA rank {rank} (its "
                             "adapter_config.json)")
        rank = given
    else:
        rank = max([*read.values(), *([DEFAULT_RANK] if unread else [])])
        if unread:
            notes.append(f"LoRA rank of {', '.join(unread)} not read (no adapter_config.json "
                         f"here): counted as {DEFAULT_RANK}; --max-lora-rank R sets it")
    if engine == "vllm":
        fitting = [r for r in VLLM_RANKS if r >= rank]
        if not fitting:
            raise UsageError(f"LoRA rank {rank} exceeds vLLM's largest --max-lora-rank "
                             f"({VLLM_RANKS[-1]})")
        if fitting[0] != rank:
            notes.append(f"LoRA rank {rank} rounded up to {fitting[0]}, the next value vLLM's "
                         "--max-lora-rank accepts")
        rank = fitting[0]
    return rank, notes


def module_arg(engine: str, site: LoraSite) -> str:
    """One LoRA's argument: ``NAME=PATH``, or the JSON object both engines also read when the
    name or path holds a character that form cannot carry (vLLM splits ``NAME=PATH`` at every
    ``=`` and reads an item holding ``,`` as JSON)."""
    if "=" not in site.engine_name + site.path and "," not in site.engine_name + site.path:
        return f"{site.engine_name}={site.path}"
    keys = ("name", "path") if engine == "vllm" else ("lora_name", "lora_path")
    return json.dumps(dict(zip(keys, (site.engine_name, site.path), strict=True)))


def address(api_base: str) -> tuple[str, int]:
    """The host and port the engine listens on, from ``engine.api_base``."""
    parts = urlsplit(api_base)
    if not parts.hostname:
        raise UsageError(f"engine.api_base {api_base!r} names no host to listen on")
    try:
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"engine.api_base {api_base!r}: {exc}") from exc
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


def command(artifact: Any, engine: str, model_root: Path | None = None,
            max_lora_rank: int | None = None) -> Launch:
    """The launch command of ``engine`` (``vllm`` or ``sglang``) serving ``artifact``."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}: one of {', '.join(ENGINES)}")
    doc = artifact.doc
    sites = lora_sites(artifact, model_root)
    if not sites:
        raise UsageError("no adapter of the artifact gives a lora ([adapters.NAME] lora = "
                         "{ path = ... }): nothing for the engine to load")
    base = base_path(doc, model_root)
    rank, notes = max_rank(sites, max_lora_rank, engine)
    host, port = address(doc.engine.api_base)
    modules = [module_arg(engine, site) for site in sites]
    launch = doc.engine.launch
    parsers: list[str] = []
    if launch.reasoning_parser:
        parsers += ["--reasoning-parser", launch.reasoning_parser]
    if launch.tool_call_parser:
        parsers += ["--tool-call-parser", launch.tool_call_parser]
    if engine == "vllm":
        env = ({RUNTIME_UPDATES: "True"}
               if doc.engine.register_loras or doc.engine.lora_api == "vllm" else {})
        if launch.tool_call_parser:  # vLLM parses tool calls only for tool_choice "auto" with it
            parsers.append("--enable-auto-tool-choice")
        argv = ["vllm", "serve", base, "--served-model-name", doc.model.base,
                "--host", host, "--port", str(port), "--enable-lora",
                "--lora-modules", *modules, "--max-loras", str(len(sites)),
                "--max-lora-rank", str(rank)]
    else:
        env = {}
        argv = ["python", "-m", "sglang.launch_server", "--model-path", base,
                "--served-model-name", doc.model.base, "--host", host, "--port", str(port),
                "--enable-lora", "--lora-paths", *modules,
                "--max-loras-per-batch", str(len(sites)), "--max-lora-rank", str(rank)]
    return Launch(env, argv + parsers + list(launch.extra_args), notes)
