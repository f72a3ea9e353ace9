"""Deferred summaries over the scripted engine: one summary request per segment of one
adapter's turns, written when another adapter is about to answer or the conversation goes
idle; every reader gets the same text, every view stays append-only, and a conversation
stored between a turn and its segment's summary loses nothing."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from mol.hcp.loader import load
from mol.runtime import Recorder, open_store
from mol.runtime.deferred import open_turns
from mol.runtime.testing import ScriptedEngine

from .conftest import session, toy_plugins

pytestmark = pytest.mark.anyio

ADAPTERS = ("L0", "L1", "L2", "L3")
PLAN = ["L2"] * 4 + ["L1"] * 3 + ["L2"] * 2 + ["L0"] + ["L3"] * 2 + ["L2"] * 2
"""Runs of turns on one adapter, with five switches."""
FORTY = ["L2"] * 8 + ["L1"] * 5 + ["L2"] * 7 + ["L0"] * 6 + ["L3"] * 5 + ["L2"] * 9
"""The 40-turn session of bench/engine_efficiency_bench.py: runs of 5-10 turns."""


def hcp(tmp_path: Path, when: str, others: str = "user+summary", extra: str = "",
        summary: str = "") -> Any:
    path = tmp_path / "mol.toml"
    path.write_text(f"""schema_version = 1
name = "deferred"
[router]
prompt = "Route the turn."
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
[adapters.L3]
prompt = "You draw."
[summary]
when = "{when}"
{summary}
[views]
others = "{others}"
{extra}""")
    return load(path)


def text_of(number: int, adapter: str) -> str:
    return f"t{number:02d} for @{adapter}"


def script(turns: int) -> dict[str, list[dict[str, Any]]]:
    """Route by the @ADAPTER mark; each summary names the last turn it covers (rules for
    later turns first, so a segment's summary is its last turn's); answers name the turn."""
    rules: dict[str, list[dict[str, Any]]] = {name: [] for name in ADAPTERS}
    for name in ADAPTERS:
        rules["L0"].append({"constrained": True, "when": f"@{name}", "times": -1,
                            "reply": name})
    for name in ADAPTERS:
        rules[name] += [{"when_system": "^Summarize", "when": f"t{n:02d} ", "times": -1,
                         "reply": f"summary up to t{n:02d}"} for n in reversed(range(turns))]
        rules[name].append({"times": -1, "reply": f"{name} answered"})
    return rules


async def play(artifact: Any, plan: list[str], engine: ScriptedEngine, **options: Any) -> Any:
    h = session(artifact, engine, **options)
    async with h:
        for number, adapter in enumerate(plan):
            result = await h.turn(text_of(number, adapter))
            assert result.adapter == adapter
    return h


def kinds(engine: ScriptedEngine) -> list[str]:
    def kind(record: dict[str, Any]) -> str:
        if record["constraint"] is not None:
            return "route"
        first = record["body"]["messages"][0]
        return "summary" if first["content"].startswith("Summarize") else "answer"
    return [kind(r) for r in engine.requests]


async def test_eager_costs_three_requests_a_turn_deferred_one_summary_a_segment(tmp_path):
    counts = {}
    for when in ("eager", "deferred"):
        async with ScriptedEngine.serve(script(len(FORTY))) as engine:
            h = await play(hcp(tmp_path, when), FORTY, engine)
            before_idle = kinds(engine)
            assert await h.settle() == (1 if when == "deferred" else 0)
            counts[when] = kinds(engine)
        if when == "deferred":
            assert before_idle.count("summary") == 5  # one per switch of adapter
            assert [(s["adapter"], len(s["turns"])) for s in h.conversation.segments] == [
                ("L2", 8), ("L1", 5), ("L2", 7), ("L0", 6), ("L3", 5), ("L2", 9)]
            assert open_turns(h.conversation) == []
    assert len(counts["eager"]) / len(FORTY) == 3.0
    assert counts["eager"].count("summary") == len(FORTY)
    assert counts["deferred"].count("route") == counts["deferred"].count("answer") == 40
    assert counts["deferred"].count("summary") == 6  # five switches, then idle
    assert len(counts["deferred"]) / len(FORTY) == 86 / 40 <= 2.3


@pytest.mark.parametrize("others", ["user+summary", "summary"])
async def test_every_request_of_an_adapter_extends_its_previous_one(tmp_path, others):
    async with ScriptedEngine.serve(script(len(PLAN))) as engine:
        await play(hcp(tmp_path, "deferred", others), PLAN, engine)
    answers = [r for r, k in zip(engine.requests, kinds(engine), strict=True) if k == "answer"]
    for adapter in ADAPTERS:
        requests = [r["body"]["messages"] for r in answers if r["adapter"] == adapter]
        assert requests, adapter
        for earlier, later in itertools.pairwise(requests):
            assert later[:len(earlier)] == earlier  # byte for byte: nothing earlier changed


@pytest.mark.parametrize("when", ["eager", "deferred"])
async def test_no_adapter_answers_without_the_summaries_of_every_turn_it_did_not_see(
        tmp_path, when):
    async with ScriptedEngine.serve(script(len(PLAN))) as engine:
        h = await play(hcp(tmp_path, when), PLAN, engine)
    answers = [r for r, k in zip(engine.requests, kinds(engine), strict=True) if k == "answer"]
    assert len(answers) == len(PLAN)
    for number, (adapter, request) in enumerate(zip(PLAN, answers, strict=True)):
        sent = json.dumps(request["body"]["messages"])
        for earlier in range(number):
            if PLAN[earlier] == adapter:
                continue
            # Its user message and the summary of the segment it ended in (eager: its own).
            last = earlier
            if when == "deferred":
                while last + 1 < number and PLAN[last + 1] == PLAN[earlier]:
                    last += 1
            assert text_of(earlier, PLAN[earlier]) in sent, (number, earlier)
            assert f"summary up to t{last:02d}" in sent, (number, earlier)
    if when == "deferred":  # every reader got the same text for a segment
        l2_segment = h.conversation.segments[0]
        for reader in ("L0", "L1", "L3"):
            first = next(e for e in h.conversation.view(reader)
                         if e["role"] == "assistant" and "summary up to" in e["content"])
            assert first["content"] == l2_segment["summary"] == "[L2] summary up to t03"


async def test_skipped_adapters_keep_their_plain_record_at_once(tmp_path):
    artifact = hcp(tmp_path, "deferred", summary='skip = ["L1"]')
    plan = ["L2", "L2", "L1", "L1", "L2"]
    async with ScriptedEngine.serve(script(len(plan))) as engine:
        h = await play(artifact, plan, engine)
    assert kinds(engine).count("summary") == 1  # L2's first segment; L1's turns cost none
    turns = h.conversation.turns
    assert [t.summary for t in turns[2:4]] == [
        "L1 handled: t02 for @L1 -> L1 answered", "L1 handled: t03 for @L1 -> L1 answered"]
    assert [s["turns"] for s in h.conversation.segments] == [[0, 1]]
    assert [t.index for t in open_turns(h.conversation)] == [4]


async def test_subagent_stop_sees_each_segment_once_with_its_summary(tmp_path):
    hook = tmp_path / "stop.py"
    hook.write_text("import json, pathlib, sys\n"
                    "with open(pathlib.Path(__file__).with_name('stops.jsonl'), 'a') as f:\n"
                    "    f.write(sys.stdin.read().strip() + '\\n')\n")
    extra = (f'[[hooks.SubagentStop]]\nhooks = [{{ command = "{Path(sys.executable).as_posix()} '
             f'{hook.as_posix()}" }}]\n')
    async with ScriptedEngine.serve(script(len(PLAN))) as engine:
        h = await play(hcp(tmp_path, "deferred", extra=extra), PLAN, engine)
    stops = [json.loads(line) for line in (tmp_path / "stops.jsonl").read_text().splitlines()]
    segments = h.conversation.segments
    assert [(s["agent_type"], s["summary"], s["agent_id"]) for s in stops] == [
        (g["adapter"], g["summary"], f"{h.conversation.id}:{g['turns'][-1]}")
        for g in segments]
    assert [s["last_assistant_message"] for s in stops] == [
        f"{g['adapter']} answered" for g in segments]


async def test_a_conversation_stored_before_its_segment_was_summarized_loses_nothing(
        tmp_path):
    artifact = hcp(tmp_path, "deferred")
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    async with ScriptedEngine.serve(script(4)) as engine:
        async with open_store(url) as store:
            recorder = Recorder(store, artifact.digest)
            first = session(artifact, engine, checkpoint=recorder.checkpoint)
            async with first:
                for number in (0, 1):
                    await first.turn(text_of(number, "L2"))
            conversation_id = first.conversation.id
            # A new process: only the store knows the two L2 turns still need a summary.
            stored = await store.load(conversation_id)
            assert [t.index for t in open_turns(stored)] == [0, 1]
            second = session(artifact, engine, conversation=stored,
                             checkpoint=Recorder(store, artifact.digest).checkpoint,
                             plugins=toy_plugins())
            async with second:
                await second.turn(text_of(2, "L1"))
            final = await store.load(conversation_id)
    summaries = [r for r, k in zip(engine.requests, kinds(engine), strict=True)
                 if k == "summary"]
    assert len(summaries) == 1
    body = summaries[0]["body"]["messages"][-1]["content"]
    assert "t00 for @L2" in body and "t01 for @L2" in body
    l1 = json.dumps(engine.requests_for("L1")[-1]["body"]["messages"])
    assert "summary up to t01" in l1 and "t00 for @L2" in l1 and "t01 for @L2" in l1
    assert final.segments == [{"adapter": "L2", "turns": [0, 1],
                               "summary": "[L2] summary up to t01", "ok": True}]
    assert [t.index for t in open_turns(final)] == [2]
