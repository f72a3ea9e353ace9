"""Whether the engine serves the artifact's adapters: ``GET /v1/models`` against the
artifact's engine names.

Each adapter is looked up by its engine name (``HCP.engine_name``: versioned,
``NAME@<12 hex>``, when it has a ``lora``). One not listed is *missing*; for a LoRA whose
other version is listed, the problem says so (the engine serves an older or newer file:
``mol adapters register`` loads this one). Where the engine reports the base a LoRA was
loaded on (``parent``, as vLLM lists LoRAs) and the artifact names ``[model] base``, a LoRA
on another base is *foreign*: its weights would be applied to a model they were not
trained for. The parent matches the base when equal, or when its last path component
equals the base (vLLM's parent is the base's id, often a path or ``org/name``), ignoring
case.

``check_adapters`` reads the list and checks it (``mol engine check``, ``GET /health``);
``require_served`` refuses to go on with a runtime whose engine misses an adapter (the
start of ``mol serve``, ``mol run``, ``mol chat``) and hands the list to the runtime's
windows, so that start costs one model-list request in all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mol.core.errors import (
    EngineAdapterUnavailable,
    EngineConnectionError,
    EngineProtocolError,
    EngineResponseError,
)
from mol.hcp.loras import unversioned
from mol.runtime.engine.http import http_client

TIMEOUT = 10.0
"""Seconds the model list may take (an engine busy loading still answers it quickly)."""


@dataclass(frozen=True)
class AdapterState:
    """One adapter against the engine: ``state`` is ``ok``, ``missing`` or ``foreign``;
    ``detail`` says why (empty when ok)."""

    adapter: str
    engine_name: str
    state: str
    detail: str = ""

    def line(self) -> str:
        """What ``mol engine check`` prints for it."""
        return f"{self.state:<8} " + (
            self.detail or f"{self.adapter} (engine name {self.engine_name})")


@dataclass
class EngineCheck:
    """The engine's model list at ``url`` (``listed``: its ``data``) and each adapter's
    state against it."""

    url: str
    listed: list[dict[str, Any]]
    states: list[AdapterState] = field(default_factory=list)

    @property
    def problems(self) -> list[AdapterState]:
        """The adapters that are missing or foreign."""
        return [s for s in self.states if s.state != "ok"]

    def named(self, state: str) -> list[str]:
        """The adapters in ``state`` (``missing``, ``foreign``)."""
        return [s.adapter for s in self.states if s.state == state]

    def raise_for_problems(self) -> None:
        """``EngineAdapterUnavailable`` naming every missing or foreign adapter, if any."""
        problems = self.problems
        if problems:
            reasons = "; ".join(s.detail for s in problems)
            raise EngineAdapterUnavailable(
                f"the engine at {self.url} does not serve the artifact's adapters: {reasons} "
                "(check with 'mol engine check'; --no-engine-check starts anyway)")


def check_listing(artifact: Any, listed: list[dict[str, Any]], url: str = "") -> EngineCheck:
    """Each of ``artifact``'s adapters against the engine's model list ``listed``."""
    doc = artifact.doc
    ids = {entry["id"]: entry for entry in listed if isinstance(entry.get("id"), str)}
    base = doc.model.base
    states = []
    for adapter in doc.adapter_names:
        name = doc.engine_name(adapter)
        entry = ids.get(name)
        if entry is None:
            states.append(AdapterState(adapter, name, "missing", _missing(adapter, name, ids)))
            continue
        parent = entry.get("parent")
        if base and isinstance(parent, str) and parent and not same_base(parent, base):
            states.append(AdapterState(adapter, name, "foreign", (
                f"{adapter} (engine name {name}) is foreign: the engine serves it on base "
                f"{parent!r}, not the artifact's [model] base {base!r}")))
            continue
        states.append(AdapterState(adapter, name, "ok"))
    return EngineCheck(url, listed, states)


def same_base(parent: str, base: str) -> bool:
    """Whether the engine's ``parent`` of a LoRA is the artifact's ``base``: equal, or its
    last path component is (case-insensitive)."""
    parent, base = parent.strip().lower(), base.strip().lower()
    return parent == base or parent.rstrip("/").rsplit("/", 1)[-1] == base


def _missing(adapter: str, name: str, ids: dict[str, Any]) -> str:
    stem = unversioned(name)
    if stem != name:  # a LoRA: is another version (or the bare name) of it served?
        others = sorted(i for i in ids if i != name and unversioned(i) == stem)
        if others:
            return (f"{name} is not served (the engine serves {', '.join(others)}: register "
                    f"it with mol adapters register)")
    return f"{adapter} (engine name {name}) is not served by the engine"


async def list_models(api_base: str, api_key: str | None = None,
                      wait: float = TIMEOUT) -> list[dict[str, Any]]:
    """The ``data`` of ``GET {api_base}/models``. ``EngineConnectionError`` when nothing
    answers, ``EngineResponseError`` (with ``status``) for an error status,
    ``EngineProtocolError`` for an answer that is no model list; each names the URL.
    ``wait``: seconds the answer may take."""
    import httpx

    url = f"{api_base.rstrip('/')}/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with http_client(url, wait) as client:
            response = await client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        raise EngineConnectionError(f"the engine's model list GET {url} got no answer: "
                                    f"{type(exc).__name__}: {exc}") from exc
    if response.status_code >= 400:
        raise EngineResponseError(f"the engine's model list GET {url} answered HTTP "
                                  f"{response.status_code}", response.status_code)
    try:
        data = response.json().get("data")
    except (ValueError, AttributeError) as exc:
        raise EngineProtocolError(f"the engine's model list GET {url} is not a JSON "
                                  "object") from exc
    if not isinstance(data, list):
        raise EngineProtocolError(f"the engine's model list GET {url} has no 'data' list")
    return [entry for entry in data if isinstance(entry, dict)]


async def check_adapters(artifact: Any, api_base: str, *, api_key: str | None = None,
                         wait: float = TIMEOUT) -> EngineCheck:
    """Read the model list of the engine at ``api_base`` and check ``artifact``'s adapters
    against it (``list_models``'s errors when it cannot be read)."""
    listed = await list_models(api_base, api_key, wait)
    return check_listing(artifact, listed, f"{api_base.rstrip('/')}/models")


def http_engine(engine: Any) -> Any:
    """The HTTP engine ``engine`` is or wraps (a traced engine wraps one), or None."""
    while engine is not None and not isinstance(getattr(engine, "api_base", None), str):
        engine = getattr(engine, "inner", None)
    return engine


async def check_engine(artifact: Any, engine: Any, *, wait: float = TIMEOUT
                       ) -> EngineCheck | None:
    """``check_adapters`` against ``engine`` (a ``LiteLLMEngine``, or one wrapping it), with
    its key; None for an engine not reached over HTTP (nothing to ask)."""
    found = http_engine(engine)
    if found is None:
        return None
    return await check_adapters(artifact, found.api_base,
                                api_key=getattr(found, "api_key", None), wait=wait)


async def require_served(artifact: Any, engine: Any, windows: Any = None) -> EngineCheck | None:
    """Check that ``engine`` serves ``artifact``'s adapters, raising
    ``EngineAdapterUnavailable`` naming each missing or foreign one; None for an engine not
    reached over HTTP (nothing to ask). The list read feeds ``windows`` (a runtime's
    ``Windows``), which then asks the engine no more."""
    check = await check_engine(artifact, engine)
    if check is None:
        return None
    if windows is not None:
        windows.report(check.listed)
    check.raise_for_problems()
    return check
