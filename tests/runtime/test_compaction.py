"""Compaction: each adapter's view kept within its context window (mol.runtime.compaction),
against the scripted engine with a window it enforces as vLLM does."""

from __future__ import annotations

import random

import anyio
import pytest

from mol.core import events as ev
from mol.core.errors import ContextTooLong, EngineContextLength
from mol.hcp.loader import load
from mol.runtime import Runtime
from mol.runtime.compaction import keep_point
from mol.runtime.testing import ScriptedEngine
from mol.runtime.views import COMPACTION_HEADER, steps_problem
from mol.runtime.windows import DEFAULT_WINDOW

from .conftest import hcp_text, toy_plugins

pytestmark = pytest.mark.anyio

WINDOW = 2048

SCRIPT = """
[[L0]]
constrained = true
when = "act"
times = -1
reply = "L1"
[[L0]]
constrained = true
when = "code"
times = -1
reply = "L2"
[[L0]]
constrained = true
times = -1
reply = "L0"
[[L0]]
when = "conversation is about to be shortened"
times = -1
reply = "Summary: a long chat about Greek letters."
[[L0]]
constrained = false
when = "^User: "
times = -1
reply = "summary of the turn"
[[L0]]
times = -1
reply = "Chatting along."
[[L1]]
when = "conversation is about to be shortened"
times = -1
reply = "Summary: acted on Greek letters."
[[L1]]
when = "^please act"
times = -1
tool_calls = [{ name = "echo", arguments = { text = "done acting" } }]
[[L1]]
times = -1
reply = "Acted."
[[L2]]
when = "conversation is about to be shortened"
times = -1
reply = "Summary: coded Greek letters."
[[L2]]
when = "^please code"
times = -1
tool_calls = [{ name = "echo", arguments = { text = "done coding" } }]
[[L2]]
times = -1
reply = "Coded."
"""

ADAPTERS = """\
[engine]
api_base = "http://127.0.0.1:9/v1"
routing_constraint = "structured_outputs"
max_retries = 0
[adapters.L0]
prompt = "You chat."
[adapters.L1]
prompt = "You act."
tools.allow = ["echo"]
[adapters.L2]
prompt = "You code."
tools.allow = ["echo"]
[adapters.L3]
prompt = "You draw."
"""


def artifact(tmp_path, extra: str = ""):
    path = tmp_path / "compact.toml"
    path.write_text(hcp_text(ADAPTERS + extra))
    return load(path)


def turns(count: int) -> list[str]:
    """``count`` turns of about 200 tokens, in runs of five on one adapter."""
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    return [f"{['please act', 'please code', 'hello'][(i // 5) % 3]} "
            + " ".join(rng.choice(words) for _ in range(120)) for i in range(count)]


async def run_session(tmp_path, mode: str, count: int = 60, extra: str = "",
                      believed: int | None = None):
    """The session's results (or the error that ended it), the engine's requests, the
    session (``believed``: the window the artifact sets for every adapter)."""
    results, error = [], None
    async with ScriptedEngine.serve(SCRIPT, context_window=WINDOW) as engine:
        loaded = artifact(tmp_path, f'[compaction]\nmode = "{mode}"\n' + extra)
        if believed is not None:
            for config in loaded.doc.adapters.values():
                config.context_window = believed
        runtime = Runtime(loaded, engine_url=engine.base_url, plugins=toy_plugins())
        async with runtime.session() as session:
            with anyio.fail_after(240):
                for text in turns(count):
                    try:
                        results.append(await session.turn(text))
                    except (ContextTooLong, EngineContextLength) as exc:
                        error = exc
                        break
        return results, error, engine.requests, session


async def test_sixty_turns_fit_a_2048_token_window_when_compacted(tmp_path):
    results, error, requests, session = await run_session(tmp_path, "compact")
    assert error is None and len(results) == 60
    assert all(r.status == "complete" and r.answer for r in results)
    assert [r for r in requests if r["status"] != 200] == []  # none exceeded the window
    conversation = session.conversation
    assert {"L0", "L1", "L2"} <= {a for a, done in conversation.compactions.items() if done}
    for adapter, done in conversation.compactions.items():
        shown = conversation.engine_view(adapter)
        assert shown[0] == conversation.view(adapter)[0]  # the system prompt, untouched
        assert shown[1]["content"].startswith(COMPACTION_HEADER)
        assert steps_problem(shown[2:]) is None  # no call separated from its results
        assert all(c["tokens_after"] < c["tokens_before"] for c in done)
    # After a compaction each request of an adapter extends its previous one again.
    l1 = [r["body"] for r in requests if r["adapter"] == "L1" and "tools" in r["body"]
          and not r["body"]["messages"][-1]["content"].startswith("This conversation")]
    later = [b["messages"] for b in l1[-3:]]
    assert later[1][:len(later[0])] == later[0] or later[2][:len(later[1])] == later[1]


async def test_in_error_mode_the_first_turn_that_would_overflow_is_refused_clearly(tmp_path):
    results, error, requests, session = await run_session(tmp_path, "error")
    assert isinstance(error, ContextTooLong) and 0 < len(results) < 60
    assert f"{WINDOW}-token context window" in str(error) and error.adapter in str(error)
    assert [r for r in requests if r["status"] != 200] == []  # refused before the engine
    assert session.conversation.compactions == {}
    kept = session.conversation.turns
    assert [t.status for t in kept[:len(results)]] == ["complete"] * len(results)


async def test_with_compaction_off_the_engine_refuses_and_says_so(tmp_path):
    results, error, requests, _ = await run_session(tmp_path, "off")
    assert isinstance(error, EngineContextLength) and len(results) < 60
    refused = [r for r in requests if r["status"] == 400]
    assert len(refused) == 1 and "maximum context length is 2048" in refused[0]["error"]


async def test_an_engine_overflow_compacts_once_and_retries_once(tmp_path):
    # The artifact believes in a window twice the engine's: only the engine's 400s tell.
    results, error, requests, session = await run_session(
        tmp_path, "compact", count=25, extra="threshold = 1.0\n", believed=2 * WINDOW)
    assert error is None and len(results) == 25
    refused = [r for r in requests if r["status"] == 400]
    # A compaction request sent with the adapter's own prefix may overflow too: it is then
    # asked once more with the old part as text, cut to fit.
    asked = [r for r in refused if not r["body"]["messages"][-1]["content"].startswith(
        "This conversation is about to be shortened")]
    overflowed = [e for r in results for e in r.events
                  if isinstance(e, ev.Compacted) and e.trigger == "overflow"]
    assert asked and len(overflowed) == len(asked)  # each 400: one compaction, one retry
    assert any(c.get("trigger") == "overflow" for done in session.conversation.compactions.values()
               for c in done)


async def test_a_request_over_an_assumed_window_goes_to_the_engine(tmp_path):
    # An agent's first request (a long system prompt, many tools) may exceed the default
    # window on its own: with no window set or reported, the engine decides, not the estimate.
    big = "please act " + "word " * (DEFAULT_WINDOW * 2)
    async with ScriptedEngine.serve(SCRIPT) as engine:  # reports no max_model_len
        runtime = Runtime(artifact(tmp_path), engine_url=engine.base_url,
                          plugins=toy_plugins())
        async with runtime.session() as session:
            assert await runtime.windows.known("L1") is False
            result = await session.turn(big)
        assert result.status == "complete" and result.answer == "Acted."
    # The same request against a window the engine reports is refused before it is sent.
    async with ScriptedEngine.serve(SCRIPT, context_window=4 * DEFAULT_WINDOW) as engine:
        runtime = Runtime(artifact(tmp_path), engine_url=engine.base_url,
                          plugins=toy_plugins())
        async with runtime.session() as session:
            with pytest.raises(ContextTooLong, match="could not be compacted"):
                # about 167k tokens estimated, 100k as the engine counts: under its window
                await session.turn("please act " + "word " * 100_000)
        assert [r for r in engine.requests if r["adapter"] == "L1"] == []


def test_the_kept_part_starts_at_a_step_and_keeps_open_calls():
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_L1_1", "type": "function", "function": {"name": "echo", "arguments": "{}"}}]}
    view = [{"role": "system", "content": "S"},
            {"role": "user", "content": "one " * 50}, {"role": "assistant", "content": "a"},
            {"role": "user", "content": "two " * 50}, call,
            {"role": "tool", "tool_call_id": "call_L1_1", "content": "x" * 400}]
    # Nothing to keep: everything before the last step (which may be open) is compacted.
    assert keep_point(view, 0) == 4
    # 150 tokens keep the second question, the answer before it, and the open step.
    assert keep_point(view, 150) == 2
    # Room for a result but not for its call: the call comes along with its result.
    closed = [view[0], view[1], call, {"role": "tool", "tool_call_id": "call_L1_1",
                                       "content": "short"},
              {"role": "assistant", "content": "ok"}, view[3]]
    assert keep_point(closed, 120) == 2 and closed[2] is call
    assert keep_point(view[:2], 0) == 2  # the one question: compacted, nothing kept
    assert keep_point([view[0]], 0) is None  # only the system prompt: nothing to compact


async def test_a_compaction_asked_for_is_manual_and_checkpointed(tmp_path):
    saved: list[tuple] = []

    async def checkpoint(conversation, record, turn=None, durable=True):
        saved.append((record, dict(conversation.compactions)))

    async with ScriptedEngine.serve(SCRIPT, context_window=WINDOW) as engine:
        runtime = Runtime(artifact(tmp_path), engine_url=engine.base_url,
                          plugins=toy_plugins())
        async with runtime.session(checkpoint=checkpoint) as session:
            for text in turns(4):
                await session.turn(text)
            done = await session.compact("L1", "keep the letter names")
    [compacted] = done
    assert compacted.trigger == "manual" and compacted.tokens_after < compacted.tokens_before
    asked = [r["body"]["messages"] for r in engine.requests if r["adapter"] == "L1"][-1]
    assert asked[-1]["content"].endswith("Also: keep the letter names")
    record, state = saved[-1]
    assert record is None and state["L1"][-1]["id"] == compacted.compaction


HOOK = """\
import json, pathlib, sys
event = json.load(sys.stdin)
with open(pathlib.Path(__file__).with_name("events.jsonl"), "a") as log:
    log.write(json.dumps(event) + "\\n")
"""


def compaction_hooks(tmp_path, pre: str) -> str:
    """A PreCompact hook (``pre``: its Python body after reading the event) and a PostCompact
    hook logging what they were given."""
    import sys

    folder = tmp_path / "hooks"
    folder.mkdir()
    python = sys.executable
    (folder / "pre.py").write_text(HOOK + pre)
    (folder / "post.py").write_text(HOOK)
    return (f'[[hooks.PreCompact]]\nmatcher = "auto"\n'
            f'hooks = [{{ command = "{python} hooks/pre.py", timeout = 30 }}]\n'
            f'[[hooks.PostCompact]]\nmatcher = "*"\n'
            f'hooks = [{{ command = "{python} hooks/post.py", timeout = 30 }}]\n')


def hook_events(tmp_path) -> list[dict]:
    import json

    path = tmp_path / "hooks" / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_a_pre_compact_hook_adds_instructions_and_post_compact_sees_the_sizes(tmp_path):
    pre = ("print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreCompact', "
           "'additionalContext': 'Keep every Greek letter named.'}}))\n")
    results, error, requests, session = await run_session(
        tmp_path, "compact", count=20, extra=compaction_hooks(tmp_path, pre))
    assert error is None and len(results) == 20
    asked = [m["content"] for r in requests for m in r["body"]["messages"][-2:]
             if (m.get("content") or "").startswith("This conversation")]
    assert asked and all(a.endswith("Also: Keep every Greek letter named.") for a in asked)
    events = hook_events(tmp_path)
    pre_events = [e for e in events if e["hook_event_name"] == "PreCompact"]
    post_events = [e for e in events if e["hook_event_name"] == "PostCompact"]
    assert len(pre_events) == len(post_events) == len(asked)
    assert all(e["trigger"] == "auto" and e["custom_instructions"] == "" for e in pre_events)
    assert all(0 < e["tokens_after"] < e["tokens_before"] for e in post_events)
    done = [c for cs in session.conversation.compactions.values() for c in cs]
    assert sorted(e["tokens_after"] for e in post_events) == sorted(
        c["tokens_after"] for c in done)


async def test_a_pre_compact_hook_that_blocks_is_obeyed(tmp_path):
    pre = "print('not now', file=sys.stderr)\nsys.exit(2)\n"
    results, error, requests, session = await run_session(
        tmp_path, "compact", count=60, extra=compaction_hooks(tmp_path, pre))
    # Never compacted: the view grows until it no longer fits, then the clear error.
    assert session.conversation.compactions == {}
    assert isinstance(error, ContextTooLong) and "a hook blocked" in str(error)
    assert [r for r in requests if r["status"] != 200] == []
    assert not any(r["body"]["messages"][-1]["content"].startswith("This conversation")
                   for r in requests)
    blocked = [e for r in results for e in r.events if isinstance(e, ev.HookDecided)
               and e.event == "PreCompact"]
    assert hook_events(tmp_path) and all(e["hook_event_name"] == "PreCompact"
                                         for e in hook_events(tmp_path))
    assert blocked and all(e.decision == "block" for e in blocked)
