"""Overlapped routing over the scripted engine (``[router] speculate = "sticky"``): the
answer on the last adapter starts with the route hop; when the route agrees it is the
turn's answer (one request, not two), when it disagrees it is cancelled and nothing of it
reaches the turn's events, the views, the stored session or a hook; tools never run
before the route."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mol.core import events as ev
from mol.hcp.loader import load
from mol.plugins import hookimpl
from mol.runtime import Recorder, open_store
from mol.runtime.testing import ScriptedEngine

from .conftest import session, toy_plugins

pytestmark = pytest.mark.anyio

LEAK = "WRONG-ADAPTER-TEXT"


def hcp(tmp_path: Path, speculate: str = "sticky", extra: str = "") -> Any:
    path = tmp_path / "mol.toml"
    path.write_text(f"""schema_version = 1
name = "speculating"
[router]
prompt = "Route the turn."
speculate = "{speculate}"
[engine]
api_base = "http://127.0.0.1:9/v1"
model_prefix = "hosted_vllm/"
max_retries = 0
[adapters.L0]
prompt = "You chat."
[adapters.L1]
prompt = "You act."
[adapters.L2]
prompt = "You code."
tools.allow = ["note"]
[summary]
when = "deferred"
{extra}""")
    return load(path)


def script(route_delay: float = 0.3, wrong_delay: float = 2.0,
           wrong: str = f'reply = "{LEAK} from L2"') -> str:
    """@L1 / @L2 route there after ``route_delay``; L2 asked about an @L1 turn (the wrong
    guess) answers ``wrong`` after ``wrong_delay``."""
    return f"""
[[L0]]
constrained = true
when = "@L1"
times = -1
delay = {route_delay}
reply = "L1"
[[L0]]
constrained = true
when = "@L2"
times = -1
delay = {route_delay}
reply = "L2"
[[L1]]
when_system = "^Summarize"
times = -1
reply = "L1 summary"
[[L2]]
when_system = "^Summarize"
times = -1
reply = "L2 summary"
[[L2]]
when = "@L1"
times = -1
delay = {wrong_delay}
{wrong}
[[L2]]
when = "NOTED"
times = -1
reply = "L2 noted it"
[[L2]]
when = "take note"
times = -1
tool_calls = [{{ name = "note", arguments = {{ text = "noted" }} }}]
[[L2]]
times = -1
reply = "L2 answered the turn"
[[L1]]
times = -1
reply = "L1 answered the turn"
"""


class Notes:
    """A ``note`` tool that remembers when it ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    @hookimpl
    def mol_register_tools(self, register: Any) -> None:
        def note(text: str) -> str:
            """Take a note."""
            self.ran.append(text)
            return text.upper()

        register(note)


def streamed(events: list[ev.Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, ev.TextDelta))


async def test_an_agreeing_route_keeps_the_answer_started_ahead(tmp_path):
    async with ScriptedEngine.serve(script(wrong_delay=0)) as engine, \
            session(hcp(tmp_path), engine) as h:
        first = await h.turn("one @L2", stream=True)
        second = await h.turn("two @L2", stream=True)
    assert first.adapter == second.adapter == "L2"
    assert not [e for e in first.events if isinstance(e, ev.Speculated)]  # nothing to guess
    assert [e.to_dict() for e in second.events if isinstance(e, ev.Speculated)] == [
        {"type": "speculation", "adapter": "L2", "held": True, "reason": ""}]
    assert streamed(second.events) == second.answer == "L2 answered the turn"
    answers = [r for r in engine.requests_for("L2") if "two @L2" in json.dumps(r["body"])]
    assert len(answers) == 1 and not answers[0].get("cancelled")  # one request, not two
    kinds = [type(e).__name__ for e in second.events]
    assert kinds.index("RouteDecided") < kinds.index("TextDelta")  # held until routed


async def test_a_disagreeing_route_cancels_the_answer_started_ahead(tmp_path):
    async with ScriptedEngine.serve(script(wrong_delay=5)) as engine, \
            session(hcp(tmp_path), engine) as h:
        await h.turn("one @L2", stream=True)
        started = time.monotonic()
        second = await h.turn("two @L1", stream=True)
        took = time.monotonic() - started
    assert second.adapter == "L1" and second.answer == "L1 answered the turn"
    assert took < 4  # it did not wait for the wrong answer
    guess = [r for r in engine.requests_for("L2") if "two @L1" in json.dumps(r["body"])
             and r["body"]["messages"][0]["content"].startswith("You code")]
    assert len(guess) == 1 and guess[0]["cancelled"] is True  # the engine saw it go
    assert [e.to_dict() for e in second.events if isinstance(e, ev.Speculated)] == [
        {"type": "speculation", "adapter": "L2", "held": False,
         "reason": "the route chose L1"}]


async def test_nothing_of_a_wrong_guess_reaches_events_views_store_or_hooks(tmp_path):
    log = tmp_path / "hooks.jsonl"
    hook = tmp_path / "hook.py"
    hook.write_text("import sys\nwith open(sys.argv[1], 'a') as f:\n"
                    "    f.write(sys.stdin.read().strip() + '\\n')\n")
    command = f"{Path(sys.executable).as_posix()} {hook.as_posix()} {log.as_posix()}"
    extra = "".join(f'[[hooks.{event}]]\nhooks = [{{ command = "{command}" }}]\n'
                    for event in ("SubagentStart", "Stop", "SubagentStop", "PreToolUse",
                                  "PostToolUse"))
    artifact = hcp(tmp_path, extra=extra)
    seen: list[ev.Event] = []
    # The wrong answer is complete before the route is known: all of it was held back.
    async with ScriptedEngine.serve(script(route_delay=0.6, wrong_delay=0)) as engine, \
            open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        async with session(artifact, engine, observers=[seen.append],
                           checkpoint=Recorder(store, artifact.digest).checkpoint) as h:
            await h.turn("one @L2", stream=True)
            await h.turn("two @L1", stream=True)
            assert await h.settle() == 1
        stored = await store.load(h.conversation.id)
        logs = await store.turn_logs(h.conversation.id)
    guess = [r for r in engine.requests_for("L2") if "two @L1" in json.dumps(r["body"])
             and r["body"]["messages"][0]["content"].startswith("You code")]
    assert len(guess) == 1 and guess[0]["status"] == 200  # answered in full, then dropped
    assert not guess[0].get("cancelled")
    assert LEAK not in json.dumps([e.to_dict() for e in seen])
    assert LEAK not in json.dumps(h.conversation.to_dict())
    assert LEAK not in json.dumps(stored.to_dict()) + json.dumps(logs)
    assert log.read_text().count("\n") >= 4 and LEAK not in log.read_text()
    assert "two @L1" not in json.dumps(stored.view("L2"))  # only the summary went to L2's queue


async def test_a_guess_asking_for_a_tool_runs_no_tool_before_the_route(tmp_path):
    notes = Notes()
    wrong = 'tool_calls = [{ name = "note", arguments = { text = "from the guess" } }]'
    async with ScriptedEngine.serve(script(route_delay=0.5, wrong_delay=0,
                                           wrong=wrong)) as engine, \
            session(hcp(tmp_path), engine, plugins=toy_plugins(("notes", notes))) as h:
        await h.turn("one @L2", stream=True)
        # The guess (L2) asks for the tool at once; the route agrees half a second later.
        held = await h.turn("take note @L2", stream=True)
        assert notes.ran == ["noted"] and held.answer == "L2 noted it"
        await h.turn("two @L1", stream=True)  # this guess asks for the tool too: never run
    assert notes.ran == ["noted"]
    assert [e.held for e in held.events if isinstance(e, ev.Speculated)] == [True]
    kinds = [type(e).__name__ for e in held.events]
    assert kinds.index("RouteDecided") < kinds.index("ToolCalled")


async def test_a_hook_that_changes_the_request_makes_the_guess_void(tmp_path):
    hook = tmp_path / "start.py"
    hook.write_text("print('Context from the SubagentStart hook.')\n")
    extra = (f'[[hooks.SubagentStart]]\nhooks = [{{ command = '
             f'"{Path(sys.executable).as_posix()} {hook.as_posix()}" }}]\n')
    async with ScriptedEngine.serve(script()) as engine, \
            session(hcp(tmp_path, extra=extra), engine) as h:
        await h.turn("one @L2", stream=True)
        second = await h.turn("two @L2", stream=True)
    assert second.answer == "L2 answered the turn"
    [decided] = [e for e in second.events if isinstance(e, ev.Speculated)]
    assert not decided.held and "differed" in decided.reason
    asked = [r for r in engine.requests_for("L2") if "two @L2" in json.dumps(r["body"])]
    assert len(asked) == 2  # the guess (without the hook's context), then the real one
    assert "Context from the SubagentStart hook." in json.dumps(asked[1]["body"])


async def test_no_guess_without_a_last_adapter_a_route_hop_or_an_engine_that_allows_it(
        tmp_path):
    class Wrapped:  # an engine wrapping another, not saying it may be abandoned mid-request
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def complete(self, *args: Any, **kwargs: Any) -> Any:
            return await self.inner.complete(*args, **kwargs)

    async with ScriptedEngine.serve(script()) as engine:
        async with session(hcp(tmp_path), engine) as h:
            await h.turn("one @L2")
            pinned = await h.turn("two @L2", adapter="L2")
        async with session(hcp(tmp_path), engine) as h:
            h.engine = Wrapped(h.engine)
            await h.turn("one @L2")
            wrapped = await h.turn("two @L2")
        async with session(hcp(tmp_path, speculate="off"), engine) as h:
            await h.turn("one @L2")
            off = await h.turn("two @L2")
    for result in (pinned, wrapped, off):
        assert not [e for e in result.events if isinstance(e, ev.Speculated)]


async def test_a_guess_cancelled_for_another_route_is_not_taken_by_its_fallback(tmp_path):
    # The route picks L1, which the engine has not loaded; the unavailable fallback is L2,
    # the adapter guessed and cancelled: L2 answers with a request of its own.
    artifact = hcp(tmp_path)
    path = tmp_path / "mol.toml"
    path.write_text(path.read_text().replace(
        'speculate = "sticky"', 'speculate = "sticky"\nunavailable_fallback = "L2"'))
    artifact = load(path)
    rules = ('[[L1]]\nwhen = "two @L1"\nerror = { kind = "adapter_not_loaded" }\n'
             + script(wrong_delay=2, wrong='reply = "L2 took the turn over"'))
    async with ScriptedEngine.serve(rules) as engine, session(artifact, engine) as h:
        await h.turn("one @L2", stream=True)
        second = await h.turn("two @L1", stream=True)
    assert (second.adapter, second.route, second.answer) == (
        "L2", "fallback", "L2 took the turn over")
    assert streamed(second.events) == "L2 took the turn over"
    asked = [r for r in engine.requests_for("L2") if "two @L1" in json.dumps(r["body"])
             and r["body"]["messages"][0]["content"].startswith("You code")]
    assert [bool(r.get("cancelled")) for r in asked] == [True, False]
    assert [e.held for e in second.events if isinstance(e, ev.Speculated)] == [False]
