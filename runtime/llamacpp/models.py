"""The local engine's model entries, its model list, and vLLM's runtime LoRA endpoints.

Every adapter the engine serves is one entry: its own llama.cpp context (and KV and prompt
cache) over the same memory-mapped base model, with or without a LoRA. Besides the entries
it starts with, ``POST /v1/load_lora_adapter {"lora_name", "lora_path"}`` adds one for a
GGUF LoRA file while the engine runs, and ``POST /v1/unload_lora_adapter {"lora_name"}``
drops one it added, with vLLM's bodies, status codes and answers (mol's ``llamacpp``
dialect; upstream llama-server can only rescale the LoRAs given at launch).

- Loading builds the new context in a worker thread (about a second for SmolLM2-135M): the
  requests running meanwhile keep streaming, on contexts the load never touches. A name is
  never reloaded in place: a second load of a served name is vLLM's duplicate error.
- Unloading stops new requests for the name at once, then waits for the request running on
  the engine, if any (requests run one at a time), before it frees the context: a running
  request is never cut, and the answer comes once the memory is free.
- ``GET /v1/models`` lists each entry as vLLM does: the base's entries with ``parent`` null
  and ``root`` the base GGUF; a LoRA's with ``root`` its file and ``parent`` the base's id
  (the first entry served without a LoRA); all with ``max_model_len``.

This module never imports llama_cpp: ``mol.runtime.llamacpp.server`` hands in a ``Host``
that builds and frees the contexts.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any, Protocol

from mol.runtime.llamacpp.timings import Meter

GGUF_MAGIC = b"GGUF"


class NotALora(Exception):
    """The file is not a GGUF LoRA that llama.cpp can apply to the served base model."""


class Host(Protocol):
    """What the endpoints need of the server: build, serve and free contexts."""

    def load_lora(self, name: str, path: str) -> Any:
        """A new context over the base with the LoRA at ``path`` applied (blocking, run in a
        worker thread); raises ``NotALora``."""

    def serve(self, name: str, llama: Any) -> None:
        """Answer requests for ``name`` with ``llama``."""

    def drop(self, name: str) -> Any:
        """Stop serving ``name``; returns its context, for the caller to free."""

    def exclusive(self) -> AbstractAsyncContextManager[Any]:
        """Held while no request runs on the engine (the lock requests take)."""


@dataclass(frozen=True)
class Entry:
    """One served model id."""

    window: int
    """Its context window (llama.cpp's ``n_ctx``)."""
    root: str
    """The base GGUF for a bare entry; the LoRA file for a LoRA's."""
    lora: bool
    """Whether a LoRA is applied (its ``parent`` is then the base's id)."""
    runtime: bool = False
    """Added by ``/v1/load_lora_adapter`` (only those can be unloaded)."""


class Served:
    """The entries the server answers for, each model's ``Meter``, and the base's id."""

    def __init__(self, meter: Callable[[Any], Meter]) -> None:
        self.entries: dict[str, Entry] = {}
        self.base: str | None = None
        self.loading: set[str] = set()
        self._new_meter = meter
        self._meters: dict[int, Meter] = {}

    @property
    def windows(self) -> dict[str, int]:
        """Each served id's context window."""
        return {alias: entry.window for alias, entry in self.entries.items()}

    def add(self, alias: str, llama: Any, *, root: str, lora: bool,
            runtime: bool = False) -> None:
        """Serve ``llama`` as ``alias``, metered; the first entry without a LoRA is the base."""
        if not lora and self.base is None:
            self.base = alias
        self.entries[alias] = Entry(llama.n_ctx(), root, lora, runtime)
        self._meters[id(llama)] = self._new_meter(llama)

    def remove(self, alias: str, llama: Any) -> None:
        """Stop answering for ``alias`` (served by ``llama``)."""
        self.entries.pop(alias, None)
        self._meters.pop(id(llama), None)

    def meter(self, llama: Any) -> Meter:
        """The meter of a model ``add`` served."""
        return self._meters[id(llama)]

    def listing(self) -> list[dict[str, Any]]:
        """``GET /v1/models``'s ``data``, as vLLM's."""
        base = self.base or next(iter(self.entries), None)
        return [{"id": alias, "object": "model", "owned_by": "me", "permissions": [],
                 "root": entry.root, "parent": base if entry.lora else None,
                 "max_model_len": entry.window} for alias, entry in self.entries.items()]


def error(message: str, kind: str, status: HTTPStatus, param: str | None = None) -> Any:
    """vLLM's error answer: ``{"error": {"message", "type", "param", "code"}}``."""
    from starlette.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": kind, "param": param,
                                   "code": status.value}}, status_code=status.value)


def unknown_model(model: str) -> Any:
    """vLLM's answer to a request naming a model it does not serve (the stock server would
    answer it with its first model: a MoL request must never land on another adapter)."""
    return error(f"The model `{model}` does not exist.", "NotFoundError", HTTPStatus.NOT_FOUND,
                 "model")


async def _body(request: Any) -> dict[str, Any] | None:
    try:
        body = await request.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _file_error(name: str, path: str) -> Any:
    """vLLM's answer to a ``lora_path`` that names no file (404), or a file that is not GGUF
    (400); None for a GGUF file (whether it is a LoRA of this base, llama.cpp tells)."""
    if not Path(path).is_file():
        return error(f"Loading lora {name} failed: No adapter found for {path}", "NotFoundError",
                     HTTPStatus.NOT_FOUND)
    try:
        with open(path, "rb") as f:
            magic = f.read(len(GGUF_MAGIC))
    except OSError as exc:
        magic = str(exc).encode()
    if magic != GGUF_MAGIC:
        return error(f"Loading lora {name} failed: {path} is not a GGUF file (the local engine "
                     "loads LoRAs converted with llama.cpp's convert_lora_to_gguf.py)",
                     "BadRequestError", HTTPStatus.BAD_REQUEST)
    return None


async def load_lora_adapter(request: Any, served: Served, host: Host) -> Any:
    """``POST /v1/load_lora_adapter``: serve the GGUF LoRA at ``lora_path`` as ``lora_name``."""
    import anyio
    from starlette.responses import Response

    body = await _body(request) or {}
    name, path = body.get("lora_name"), body.get("lora_path")
    if not isinstance(name, str) or not isinstance(path, str) or not name or not path:
        return error("Both 'lora_name' and 'lora_path' must be provided.", "InvalidUserInput",
                     HTTPStatus.BAD_REQUEST)
    if name in served.entries or name in served.loading:
        return error(f"The lora adapter '{name}' has already been loaded.", "InvalidUserInput",
                     HTTPStatus.BAD_REQUEST)
    refused = _file_error(name, path)
    if refused is not None:
        return refused
    served.loading.add(name)
    try:
        # Shielded: a load that started ends served, even if the client goes away meanwhile.
        with anyio.CancelScope(shield=True):
            llama = await anyio.to_thread.run_sync(host.load_lora, name, path)
            host.serve(name, llama)
            served.add(name, llama, root=path, lora=True, runtime=True)
    except NotALora as exc:
        return error(f"Loading lora {name} failed: {exc}", "BadRequestError",
                     HTTPStatus.BAD_REQUEST)
    except Exception as exc:  # llama.cpp could not build the context: vLLM's answer
        return error(f"Loading lora {name} failed: {exc}", "InternalServerError",
                     HTTPStatus.INTERNAL_SERVER_ERROR)
    finally:
        served.loading.discard(name)
    return Response(f"Success: LoRA adapter '{name}' added successfully.", status_code=200)


async def unload_lora_adapter(request: Any, served: Served, host: Host) -> Any:
    """``POST /v1/unload_lora_adapter``: stop serving a LoRA ``load_lora_adapter`` added and
    free its context, once no request runs on it."""
    import anyio
    from starlette.responses import Response

    name = (await _body(request) or {}).get("lora_name")
    if not isinstance(name, str) or not name:
        return error("'lora_name' needs to be provided to unload a LoRA adapter.",
                     "InvalidUserInput", HTTPStatus.BAD_REQUEST)
    entry = served.entries.get(name)
    if entry is None:
        return error(f"The lora adapter '{name}' cannot be found.", "NotFoundError",
                     HTTPStatus.NOT_FOUND)
    if not entry.runtime:
        return error(f"'{name}' is one of the adapters the engine was started with; only LoRAs "
                     "added by /v1/load_lora_adapter can be unloaded", "BadRequestError",
                     HTTPStatus.BAD_REQUEST)
    with anyio.CancelScope(shield=True):
        del served.entries[name]  # new requests for it are refused from now on
        async with host.exclusive():  # the running request, if any, ends first
            llama = host.drop(name)
            served.remove(name, llama)
        await anyio.to_thread.run_sync(llama.close)
    return Response(f"Success: LoRA adapter '{name}' removed successfully.", status_code=200)


def routes(served: Served, host: Host) -> list[Any]:
    """The model list and the two LoRA endpoints, as Starlette routes."""
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def models(request: Any) -> Any:
        return JSONResponse({"object": "list", "data": served.listing()})

    async def load(request: Any) -> Any:
        return await load_lora_adapter(request, served, host)

    async def unload(request: Any) -> Any:
        return await unload_lora_adapter(request, served, host)

    return [Route("/v1/models", models, methods=["GET"]),
            Route("/v1/load_lora_adapter", load, methods=["POST"]),
            Route("/v1/unload_lora_adapter", unload, methods=["POST"])]

