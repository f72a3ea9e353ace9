"""Test doubles shipped with mol: the scripted engine.

``ScriptedEngine`` is a real HTTP server speaking the OpenAI Chat Completions
protocol (the way vLLM and SGLang serve LoRA adapters), answering from a TOML
script instead of a model. It runs uvicorn on loopback in a background thread,
so sync and async tests use it alike::

    with ScriptedEngine.serve(script) as engine:         # or: async with
        litellm.completion(model="hosted_vllm/L2", api_base=engine.base_url, ...)
        assert engine.requests_for("L2")[0]["body"]["messages"] == [...]
        assert engine.unused_rules() == []

The script format, the request records and the CLI (``mol engine scripted``)
are described in docs/scripted-engine.md.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread

from mol.core.errors import ServerError, UsageError
from mol.runtime.scripted.script import Rule, Script, load_script

__all__ = ["MACARON_ADAPTERS", "Rule", "Script", "ScriptedEngine", "load_script",
           "served_names"]

_STARTUP_TIMEOUT = 10.0
REASONING_FIELDS = (None, "reasoning_content", "reasoning")
"""The reasoning-parser modes: off, or the field the parser fills (vLLM's older and newer)."""


class ScriptedEngine:
    """A scripted OpenAI-compatible engine served over real HTTP while the context is open."""

    def __init__(
        self,
        script: str | Mapping[str, Any] | Path | Script,
        *,
        log_path: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        latency: float = 0.0,
        on_request: Callable[[dict[str, Any]], None] | None = None,
        reasoning_parser: str | None = None,
        seed: int | None = None,
        context_window: int | None = None,
        route_latency: float | None = None,
        lora_api: str | None = None,
        runtime_lora_updating: bool = True,
        base: str = "scripted-base",
        max_loras: int = 4,
        served: list[str] | None = None,
    ) -> None:
        """``script``: TOML text, a mapping, a TOML file path or a loaded ``Script``.

        ``port=0`` picks a free port; ``latency`` seconds are added to every
        chat request (a streamed answer's first chunk waits for them), ``route_latency``
        seconds to every constrained (routing) request instead, when given; ``on_request`` is called (in the server thread) with each
        request record after it is logged; ``reasoning_parser`` (the field it
        fills: ``"reasoning_content"`` or ``"reasoning"``) serves the script like a
        reasoning model behind a reasoning parser (docs/scripted-engine.md); ``seed`` drives
        the stochastic rules (``p``; default: the script's seed, 0); ``context_window``
        (tokens) refuses every longer request with vLLM's 400 and is reported as
        ``max_model_len`` in ``/v1/models``. ``lora_api`` (``"vllm"`` or ``"sglang"``) loads
        LoRAs at runtime as that engine does (vLLM's routes exist only with
        ``runtime_lora_updating``; SGLang without it answers as without ``--enable-lora``),
        lists them in ``/v1/models`` under the base model ``base``, and (vLLM) reports the
        LoRAs with requests in flight on ``/metrics`` (``max_loras`` run at once).
        ``served``: the names it lists and answers beside loaded LoRAs (``served_names``).
        """
        from mol.runtime.scripted.app import EngineState
        from mol.runtime.scripted.loras import LoraState

        for name, value in (("latency", latency), ("route_latency", route_latency or 0.0)):
            if not 0 <= value < float("inf"):
                raise UsageError(f"{name} must be a finite number of seconds >= 0, got {value}")
        if context_window is not None and context_window < 1:
            raise UsageError(f"context_window must be a positive number of tokens, got "
                             f"{context_window}")
        if reasoning_parser not in REASONING_FIELDS:
            raise UsageError(f"reasoning_parser must be one of {REASONING_FIELDS[1:]} or None, "
                             f"got {reasoning_parser!r}")
        self.script = load_script(script)
        if seed is not None:
            self.script.seed = seed
        self.host, self.port = host, port
        self.log_path = Path(log_path) if log_path is not None else None
        self._on_request = on_request
        loras = LoraState(lora_api, runtime_lora_updating, base, max_loras, self._record)
        self._state = EngineState(self.script, latency, self._record, reasoning_parser,
                                  context_window, route_latency, loras,
                                  served_names(self.script, served))
        self._log: Any = None
        self._stack: ExitStack | None = None

    @classmethod
    def serve(cls, script: str | Mapping[str, Any] | Path | Script, **options: Any) -> ScriptedEngine:
        """A ScriptedEngine to use as ``with`` / ``async with`` context (same options as the class)."""
        return cls(script, **options)

    @property
    def base_url(self) -> str:
        """The OpenAI ``base_url`` / litellm ``api_base``: ``http://HOST:PORT/v1``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def served(self) -> list[str]:
        """The model names listed in ``/v1/models`` and answered besides the loaded LoRAs (a
        served name without rules gets the unmatched-request 400); the engine's own list: a
        name appended while it runs is served from then on."""
        return self._state.served

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every chat request received so far, in order (a snapshot; see docs for the record shape)."""
        return list(self._state.records)

    @property
    def lora_requests(self) -> list[dict[str, Any]]:
        """Every LoRA load and unload request received so far, in order: ``path``, ``body``,
        ``adapter`` (the ``lora_name``), ``status`` and ``error``."""
        return list(self._state.loras.records)

    @property
    def loaded_loras(self) -> dict[str, str]:
        """The LoRAs loaded at runtime now: name -> the path given."""
        return dict(self._state.loras.loaded)

    def requests_for(self, adapter: str) -> list[dict[str, Any]]:
        """The requests routed to ``adapter`` (provider prefixes already stripped)."""
        return [record for record in self._state.records if record["adapter"] == adapter]

    def unused_rules(self) -> list[Rule]:
        """Rules with uses left: finite ones not used up, unlimited ones never used."""
        return self.script.unused()

    def start(self) -> None:
        """Bind, start serving in a background thread and return once connections are accepted."""
        if self._stack is not None:
            raise RuntimeError("the scripted engine is already running")
        with ExitStack() as stack:
            sock = stack.enter_context(_listen(self.host, self.port))
            self.port = sock.getsockname()[1]
            if self.log_path is not None:
                self._log = stack.enter_context(self.log_path.open("a", encoding="utf-8"))
            portal = stack.enter_context(anyio.from_thread.start_blocking_portal("asyncio"))
            future, stopping = portal.start_task(self._serve, sock, name="scripted-engine")
            stack.callback(future.result)  # re-raises anything the server died of
            stack.callback(portal.call, stopping.set)
            self._stack = stack.pop_all()

    def stop(self) -> None:
        """Stop serving (cutting scripted delays short), join the thread, close the log."""
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()

    def __enter__(self) -> ScriptedEngine:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> ScriptedEngine:
        await anyio.to_thread.run_sync(self.start)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await anyio.to_thread.run_sync(self.stop)

    async def _serve(self, sock: socket.socket, *, task_status: Any) -> None:
        from mol.runtime import serving
        from mol.runtime.scripted.app import build_app

        ready, stopping = anyio.Event(), anyio.Event()
        self._state.stopping = stopping
        async with anyio.create_task_group() as group:
            group.start_soon(partial(
                serving.serve, build_app(self._state), sockets=[sock], ready=ready,
                until=stopping, log_config=None, log_level="warning", access_log=False,
                lifespan="off", ws="none"))
            with anyio.fail_after(_STARTUP_TIMEOUT):
                await ready.wait()
            task_status.started(stopping)

    def _record(self, record: dict[str, Any]) -> None:
        if self._log is not None:
            self._log.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._log.flush()
        if self._on_request is not None:
            self._on_request(record)


MACARON_ADAPTERS = ("L0", "L1", "L2", "L3")
"""What a scripted engine serves besides its script's adapters by default: a stand-in for
a Macaron engine serving its four LoRAs, so an artifact declaring them passes the adapter
check (``mol.runtime.engine.adapters_check``) against a script naming fewer."""


def served_names(script: Script, served: list[str] | None = None) -> list[str]:
    """The model names a scripted engine serves: ``served`` when given, else the script's
    adapters and ``MACARON_ADAPTERS``, in that order."""
    if served is not None:
        return list(dict.fromkeys(served))
    return list(dict.fromkeys([*script.adapters, *MACARON_ADAPTERS]))


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``; ``ServerError`` naming the address if it fails."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ServerError(f"cannot listen on {host}:{port}: {exc}") from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ServerError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock
