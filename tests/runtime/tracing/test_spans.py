"""Spans of what the receiver tests do not reach: an ``ask`` tool's approval under its tool
call, a compaction asked for outside a turn (a root of its own, with its ``chat`` span), and
an engine error recovered by the fallback. Exported to the SDK's in-memory exporter: the
receiver tests (test_receiver.py) check the wire and the reading back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mol.hcp.loader import load
from mol.plugins import hookimpl
from mol.plugins.manager import PluginManager
from mol.runtime import open_runtime, open_tracer
from mol.runtime.testing import ScriptedEngine

from .conftest import hcp_text

pytestmark = pytest.mark.anyio

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L1"
[[L0]]
when = "conversation is about to be shortened"
times = -1
reply = "Summary: shouted."
[[L0]]
constrained = false
times = -1
reply = "Summary of the turn."
[[L1]]
when = "conversation is about to be shortened"
times = -1
reply = "Summary: shouted."
[[L1]]
when = "^please shout"
times = 1
tool_calls = [{ name = "shout", arguments = { text = "hey" } }]
[[L1]]
times = -1
reply = "Shouted."
"""


class Shout:
    @hookimpl
    def mol_register_tools(self, register: Any) -> None:
        def shout(text: str) -> str:
            """Say it louder."""
            return text.upper()

        register(shout)


def by_name(spans: list[Any], prefix: str) -> list[Any]:
    return [span for span in spans if span.name.startswith(prefix)]


async def test_approval_under_its_tool_call_and_a_compaction_outside_a_turn(tmp_path: Path):
    path = tmp_path / "mol.toml"
    path.write_text(hcp_text('[engine]\nmax_retries = 0\nrouting_constraint = "structured_outputs"\n'
                             '[adapters.L1]\nprompt = "You act."\ntools.ask = ["shout"]\n'
                             '[telemetry]\ntraces = "otlp"\n'))
    artifact = load(path)
    exported = InMemorySpanExporter()
    asked: list[str] = []

    async def approve(call: Any) -> bool:
        asked.append(call.name)
        return True

    plugins = PluginManager(None, builtin=(), extra=[("shout", Shout())])
    async with ScriptedEngine.serve(SCRIPT) as engine:
        async with open_tracer(artifact, exporter=exported) as tracer:
            async with open_runtime(artifact, engine_url=engine.base_url, plugins=plugins,
                                    tracer=tracer) as runtime:
                async with runtime.session(approve=approve) as session:
                    result = await session.turn("please shout hey")
                    compacted = await session.compact("L1")
    assert result.answer == "Shouted." and asked == ["shout"] and compacted
    spans = exported.get_finished_spans()  # all exported when the tracer closed

    [turn] = by_name(spans, "invoke_agent ")
    [tool] = by_name(spans, "execute_tool shout")
    assert tool.parent.span_id == turn.context.span_id
    assert tool.attributes["mol.tool.source"] == "plugin:shout"
    assert tool.attributes["mol.tool.kind"] == "plugin"
    [approval] = by_name(spans, "mol.approval shout")
    assert approval.parent.span_id == tool.context.span_id
    assert approval.attributes["mol.approval.allow"] is True
    assert approval.attributes["mol.approval.remembered"] is False

    [compaction] = by_name(spans, "mol.compaction L1")
    assert compaction.parent is None  # asked for outside a turn: a root
    assert compaction.attributes["mol.compaction.trigger"] == "manual"
    assert compaction.attributes["mol.compaction.tokens_after"] < compaction.attributes[
        "mol.compaction.tokens_before"]
    [writer] = [span for span in by_name(spans, "chat ")
                if span.parent is not None and span.parent.span_id == compaction.context.span_id]
    assert writer.attributes["mol.hop"] == "compaction"
    assert "Summary: shouted." not in str([dict(span.attributes) for span in spans])


async def test_an_engine_error_fails_its_chat_span_and_the_fallback_answers(tmp_path: Path):
    path = tmp_path / "mol.toml"
    path.write_text(hcp_text('[engine]\nmax_retries = 0\nrouting_constraint = "structured_outputs"\n'
                             '[adapters.L1]\nprompt = "You act."\nengine_name = "missing"\n'
                             '[telemetry]\ntraces = "otlp"\n'))
    artifact = load(path)
    exported = InMemorySpanExporter()
    async with ScriptedEngine.serve(SCRIPT) as engine:
        async with open_tracer(artifact, exporter=exported) as tracer:
            async with open_runtime(artifact, engine_url=engine.base_url,
                                    tracer=tracer) as runtime:
                async with runtime.session() as session:
                    result = await session.turn("please act")
    assert result.adapter == "L0"
    spans = exported.get_finished_spans()
    [turn] = by_name(spans, "invoke_agent ")
    assert turn.attributes["mol.route.fallback"] is True
    assert turn.attributes["mol.route.adapter"] == "L0"
    [failed] = by_name(spans, "chat missing")
    assert failed.attributes["mol.hop"] == "answer"
    assert failed.attributes["error.type"] == "EngineAdapterUnavailable"
    assert failed.status.status_code.name == "ERROR"
    errors = [event for event in turn.events if event.name == "mol.error"]
    assert [dict(event.attributes) for event in errors] == [{"mol.error.where": "answer"}]
