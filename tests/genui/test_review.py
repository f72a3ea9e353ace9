"""The repair rounds through a real harness and the scripted engine: a scripted L3 answers
UI, the checker's problems go back to it, and the turn reports the final verdict."""

from __future__ import annotations

import json

import anyio
import pytest

from mol.core import events as ev
from mol.genui.review import FEEDBACK_HEADER
from mol.hcp.loader import load
from mol.plugins.manager import PluginManager
from mol.runtime import Runtime
from mol.runtime.testing import ScriptedEngine

from .conftest import DATA, components, create, hcp_text, lines

pytestmark = pytest.mark.anyio

GOOD_TSX = (DATA / "counter.tsx").read_text()
BAD_TSX = 'export default function App() {\n  fetch("https://example.com");\n  return <p/>;\n}\n'
GOOD_A2UI = (DATA / "booking.jsonl").read_text()
BAD_A2UI = lines(create(), components({"id": "root", "component": "Column",
                                       "children": ["ghost"]}))


def fenced(kind: str, body: str) -> str:
    return f"Here is the UI.\n\n```{kind}\n{body.rstrip()}\n```\n"


def artifact(tmp_path, rounds: int = 2, genui: str | None = None):
    path = tmp_path / "genui.toml"
    table = genui if genui is not None else f"[adapters.L3.genui]\nrepair_rounds = {rounds}\n"
    path.write_text(hcp_text('[engine]\nrouting_constraint = "structured_outputs"\n'
                             "max_retries = 0\n[adapters.L3]\nprompt = \"You draw.\"\n"
                             + table + "[summary]\nenabled = false\n"))
    return load(path)


async def run_turns(tmp_path, script, texts, **options):
    """Turns pinned to L3; their results, every event, and the engine's L3 requests."""
    events: list[ev.Event] = []
    async with ScriptedEngine.serve(script) as engine:
        runtime = Runtime(artifact(tmp_path, **options), engine_url=engine.base_url,
                          plugins=PluginManager([], builtin=()))
        async with runtime.session(observers=[events.append]) as harness:
            with anyio.fail_after(120):
                results = [await harness.turn(text, adapter="L3", stream=True)
                           for text in texts]
        return results, events, [r["body"]["messages"] for r in engine.requests_for("L3")], \
            harness.conversation


def checks(events):
    return [e for e in events if isinstance(e, ev.GenUIChecked)]


@pytest.mark.genui
@pytest.mark.parametrize(("kind", "body"), [("ui4a/tsx", GOOD_TSX), ("a2ui", GOOD_A2UI)])
async def test_a_valid_ui_passes_on_the_first_answer(tmp_path, kind, body):
    script = {"L3": [{"reply": fenced(kind, body)}]}
    results, events, requests, _ = await run_turns(tmp_path, script, ["draw it"])
    [checked] = checks(events)
    assert (checked.valid, checked.final, checked.attempt) == (True, True, 0)
    assert checked.uis[0]["kind"] == ("tsx" if kind == "ui4a/tsx" else "a2ui")
    assert results[0].answer == fenced(kind, body) and len(requests) == 1
    # A checked adapter's answer is not streamed: it goes out once checked.
    assert not [e for e in events if isinstance(e, ev.TextDelta)]


@pytest.mark.genui
@pytest.mark.parametrize(("kind", "bad", "good", "where"), [
    ("ui4a/tsx", BAD_TSX, GOOD_TSX, "line 5, column 3"),
    ("a2ui", BAD_A2UI, GOOD_A2UI, "line 5 /updateComponents/components/0/children/0"),
])
async def test_a_fix_on_the_second_try_ends_valid(tmp_path, kind, bad, good, where):
    script = {"L3": [{"when": "draw", "reply": fenced(kind, bad)},
                     {"when": "mol genui check", "reply": fenced(kind, good)}]}
    results, events, requests, conversation = await run_turns(tmp_path, script, ["draw it"])
    first, second = checks(events)
    assert (first.valid, first.final, second.valid, second.final) == (False, False, True, True)
    assert first.uis[0]["problems"][0]["where"] == where
    assert results[0].answer == fenced(kind, good)
    feedback = requests[1][-1]
    assert feedback["role"] == "user" and feedback["content"].startswith(FEEDBACK_HEADER)
    assert where in feedback["content"] and "2 repair rounds left" in feedback["content"]
    # The repair request extends the first one byte for byte: nothing earlier changed.
    assert requests[1][: len(requests[0])] == requests[0]
    assert requests[1][len(requests[0])] == {"role": "assistant", "content": fenced(kind, bad)}
    view = conversation.view("L3")
    assert [m["role"] for m in view] == ["system", "user", "assistant", "user", "assistant"]


@pytest.mark.genui
async def test_a_model_that_never_fixes_it_ends_invalid_after_the_rounds(tmp_path):
    script = {"L3": [{"when": "^again please", "reply": "plain words", "times": -1},
                     {"reply": fenced("ui4a/tsx", BAD_TSX), "times": -1}]}
    results, events, requests, conversation = await run_turns(
        tmp_path, script, ["draw it", "again please"], rounds=1)
    first, last = checks(events)
    assert (first.valid, first.final, last.valid, last.final) == (False, False, False, True)
    assert last.attempt == 1 and len(requests) == 3  # one answer + one repair round, then a turn
    assert results[0].answer == fenced("ui4a/tsx", BAD_TSX) and results[0].status == "complete"
    # The next turn's request extends the last request of the repaired turn.
    assert requests[2][: len(requests[1]) + 1] == [*requests[1], conversation.view("L3")[4]]
    assert len(checks(events)) == 2  # a plain answer is not a UI: nothing to check


@pytest.mark.genui
async def test_render_ui_tool_results_are_the_verdict(tmp_path):
    script = {"L3": [
        {"when": "draw", "tool_calls": [{"name": "render_ui", "arguments": {"code": BAD_TSX}}]},
        {"when": "^invalid: fix", "tool_calls": [{"name": "render_ui",
                                                 "arguments": {"a2ui": [json.loads(line)
                                                               for line in GOOD_A2UI.splitlines()]}}]},
        {"when": "^valid", "reply": "The booking form is on screen."}]}
    results, events, requests, _ = await run_turns(tmp_path, script, ["draw it"])
    first, second = checks(events)
    assert (first.valid, second.valid, second.final) == (False, True, True)
    assert first.uis[0]["origin"] == "render_ui" and second.uis[0]["kind"] == "a2ui"
    assert results[0].answer == "The booking form is on screen."
    result_texts = [m["content"] for m in requests[-1] if m["role"] == "tool"]
    assert result_texts[0].startswith("invalid: fix these problems") and "fetch" in result_texts[0]
    assert result_texts[1] == "valid: the UI is shown to the user."


async def test_the_tool_is_offered_only_with_genui_on(tmp_path):
    async def offered(genui):
        script = {"L3": [{"reply": "ok"}]}
        async with ScriptedEngine.serve(script) as engine:
            runtime = Runtime(artifact(tmp_path, genui=genui), engine_url=engine.base_url,
                              plugins=PluginManager([], builtin=()))
            async with runtime.session() as harness:
                await harness.turn("hi", adapter="L3")
            body = engine.requests_for("L3")[0]["body"]
        return [t["function"]["name"] for t in body.get("tools") or []]

    assert await offered("[adapters.L3.genui]\n") == ["render_ui"]
    assert await offered("[adapters.L3.genui]\ntool = false\n") == []
    assert await offered("[adapters.L3.genui]\nenabled = false\n") == []
    assert await offered("[adapters.L3.genui]\n[adapters.L3.tools]\ndeny = ['render_ui']\n") == []
    assert await offered("") == []


async def test_without_the_toolchain_the_answer_goes_out_unchecked(tmp_path, monkeypatch):
    monkeypatch.setenv("MOL_GENUI_HOME", str(tmp_path / "no-toolchain"))
    script = {"L3": [{"reply": fenced("ui4a/tsx", BAD_TSX)}]}
    results, events, requests, _ = await run_turns(tmp_path, script, ["draw it"])
    assert checks(events) == [] and len(requests) == 1
    [failed] = [e for e in events if isinstance(e, ev.Failed)]
    assert failed.where == "genui" and "mol genui setup" in failed.message
    assert results[0].answer == fenced("ui4a/tsx", BAD_TSX)


BROKEN = {
    "schema violation": ("a2ui", lines(create(), components(
        {"id": "root", "component": "Text", "text": 5})),
        "schema", "line 5 /updateComponents/components/0/text"),
    "unknown component": ("a2ui", lines(create(), components(
        {"id": "root", "component": "Marquee"})),
        "unknown-component", "line 5 /updateComponents/components/0/component"),
    "dangling child": ("a2ui", BAD_A2UI,
                       "dangling-child", "line 5 /updateComponents/components/0/children/0"),
    "syntax error": ("ui4a/tsx", "export default function App() {\n  return <p>{</p>;\n}\n",
                     "syntax", "line 5, column 15"),
    "type error": ("ui4a/tsx", 'export default function App() {\n  const n: number = "1";\n'
                   "  return <p>{n}</p>;\n}\n", "type", "line 5, column 9"),
    "fetch call": ("ui4a/tsx", BAD_TSX, "forbidden", "line 5, column 3"),
}


@pytest.mark.genui
@pytest.mark.parametrize("case", list(BROKEN))
async def test_each_broken_ui_from_a_scripted_l3_is_caught_and_located(tmp_path, case):
    kind, body, rule, where = BROKEN[case]
    script = {"L3": [{"reply": fenced(kind, body)}]}
    _, events, requests, _ = await run_turns(tmp_path, script, ["draw it"], rounds=0)
    [checked] = checks(events)
    assert (checked.valid, checked.final) == (False, True) and len(requests) == 1
    found = [(p["rule"], p["where"]) for ui in checked.uis for p in ui["problems"]]
    assert (rule, where) in found, found
