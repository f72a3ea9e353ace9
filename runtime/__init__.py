"""mol's runtime: the engine boundary, the agent loop, the runtime and its sessions, MCP,
session stores and the engines mol ships (scripted, local).

What the floors above (``mol.eval``, ``mol.server``, ``mol.cli``) and plugin authors use
is named here; the modules behind these names may move. Importing this package imports
nothing else: each name is loaded on first use, so ``mol --help`` stays fast::

    from mol.runtime import open_runtime

    async with open_runtime(artifact) as runtime, runtime.session() as session:
        result = await session.turn("fix the failing test")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mol.runtime import serving
    from mol.runtime.app import collect_orphans, open_engine, open_mcp_servers, open_runtime
    from mol.runtime.deferred import open_segments, segment_of
    from mol.runtime.engine import (
        Completion,
        Engine,
        LiteLLMEngine,
        OnDelta,
        ToolCall,
        Usage,
        preload,
        start_import,
    )
    from mol.runtime.engine.adapters_check import (
        EngineCheck,
        check_adapters,
        check_engine,
        require_served,
    )
    from mol.runtime.engine.affinity import effort_params
    from mol.runtime.engine.http import http_client
    from mol.runtime.engine.loras import LoraClient, ServedModel
    from mol.runtime.engine.registration import (
        AdapterLora,
        lora_client,
        register_loras,
        register_missing,
        survey_loras,
        unregister_loras,
    )
    from mol.runtime.recorder import Recorder
    from mol.runtime.runtime import Runtime
    from mol.runtime.session import Approver, Session
    from mol.runtime.sessions import (
        LEASE_SEC,
        SessionStore,
        TurnLog,
        held,
        new_owner,
        open_store,
        store_url_for,
    )
    from mol.runtime.summary import DEFAULT_SUMMARY_PROMPT
    from mol.runtime.tracing import open_tracer
    from mol.runtime.turn import Turn, TurnResult
    from mol.runtime.views import (
        Conversation,
        TurnRecord,
        adapter_of_call,
        new_call_id,
        open_calls,
    )

_MODULES = ("serving",)
"""Public modules: ``serving`` starts every HTTP server mol runs (uvicorn)."""

_EXPORTS = {
    "open_runtime": "app", "open_engine": "app", "collect_orphans": "app",
    "open_mcp_servers": "app",
    "Runtime": "runtime",
    "Session": "session", "Approver": "session",
    "Turn": "turn", "TurnResult": "turn",
    "Conversation": "views", "TurnRecord": "views", "new_call_id": "views",
    "adapter_of_call": "views", "open_calls": "views",
    "Recorder": "recorder",
    "SessionStore": "sessions", "TurnLog": "sessions", "open_store": "sessions",
    "LEASE_SEC": "sessions", "new_owner": "sessions", "held": "sessions",
    "store_url_for": "sessions",
    "Engine": "engine", "LiteLLMEngine": "engine", "Completion": "engine",
    "ToolCall": "engine", "Usage": "engine", "OnDelta": "engine", "preload": "engine",
    "start_import": "engine", "http_client": "engine.http",
    "check_adapters": "engine.adapters_check", "check_engine": "engine.adapters_check",
    "require_served": "engine.adapters_check",
    "EngineCheck": "engine.adapters_check",
    "effort_params": "engine.affinity",
    "LoraClient": "engine.loras", "ServedModel": "engine.loras",
    "AdapterLora": "engine.registration", "lora_client": "engine.registration",
    "register_loras": "engine.registration", "register_missing": "engine.registration",
    "survey_loras": "engine.registration", "unregister_loras": "engine.registration",
    "DEFAULT_SUMMARY_PROMPT": "summary",
    "open_tracer": "tracing",
    "open_segments": "deferred", "segment_of": "deferred",
}

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "LEASE_SEC",
    "AdapterLora",
    "Approver",
    "Completion",
    "Conversation",
    "Engine",
    "EngineCheck",
    "LiteLLMEngine",
    "LoraClient",
    "OnDelta",
    "Recorder",
    "Runtime",
    "ServedModel",
    "Session",
    "SessionStore",
    "ToolCall",
    "Turn",
    "TurnLog",
    "TurnRecord",
    "TurnResult",
    "Usage",
    "adapter_of_call",
    "check_adapters",
    "check_engine",
    "collect_orphans",
    "effort_params",
    "held",
    "http_client",
    "lora_client",
    "new_call_id",
    "new_owner",
    "open_calls",
    "open_engine",
    "open_mcp_servers",
    "open_runtime",
    "open_segments",
    "open_store",
    "open_tracer",
    "preload",
    "register_loras",
    "register_missing",
    "require_served",
    "segment_of",
    "serving",
    "start_import",
    "store_url_for",
    "survey_loras",
    "unregister_loras",
]


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(f"mol.runtime.{name}")
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"mol.runtime.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'mol.runtime' has no attribute {name!r}")
