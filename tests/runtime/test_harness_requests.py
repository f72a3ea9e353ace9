"""A turn through an artifact imported from a reference-style profile (``mol hcp import
--from mol-harness``) sends the reference proxy's requests to the scripted engine, over
litellm and real HTTP: the prefill route request with the turn as written, the identity as
the answer and summary hops' system message (never the route's), the summary request, the
affinity header on each, and the thinking switch a reasoning effort sets."""

from __future__ import annotations

import pytest

from mol.hcp.changes import to_toml
from mol.hcp.harness import from_harness
from mol.hcp.loader import Artifact, load
from mol.runtime.testing import ScriptedEngine

from .conftest import IDENTITY, ROUTE_TEXT, session, write_profile

pytestmark = pytest.mark.anyio

SCRIPT = """
[[L0]]
constrained = true
when = "^please fix"
reply = "L2"
[[L0]]
constrained = true
when = "^hello"
reply = "L0"
[[L2]]
constrained = false
when = "fix the build"
reply = "Fixed the build."
[[L2]]
constrained = false
when = "^Tell in one line"
reply = "Fixed a build."
[[L0]]
constrained = false
when = "hello there$"
reply = "Hi."
[[L0]]
constrained = false
when = "^Tell in one line"
reply = "Greeted."
"""


def imported(tmp_path) -> Artifact:
    folder = write_profile(tmp_path / "profiles")
    out = tmp_path / "out"
    out.mkdir()
    (out / "tall.toml").write_text(to_toml(from_harness(folder, out).artifact))
    return load(out / "tall.toml")


async def test_a_turn_sends_the_reference_requests(tmp_path):
    artifact = imported(tmp_path)
    async with ScriptedEngine.serve(SCRIPT) as engine, session(artifact, engine) as h:
        result = await h.turn("please fix the build \n")
        await h.turn("  hello there")
    assert result.adapter == "L2" and result.answer == "Fixed the build."
    route, answer, summary = engine.requests[:3]
    assert route["body"]["messages"] == [
        {"role": "user", "content": "please fix the build\n\n" + ROUTE_TEXT},
        {"role": "assistant", "content": "model_id="}]
    body = route["body"]
    assert (body["continue_final_message"], body["add_generation_prompt"]) == (True, False)
    assert (body["temperature"], body["max_tokens"]) == (0, 24)
    assert body["structured_outputs"] == {"choice": ["L0", "L1", "L2", "L3"]}
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert (answer["adapter"], answer["body"]["messages"]) == ("L2", [
        {"role": "system", "content": IDENTITY},
        {"role": "user", "content": "please fix the build \n"}])
    assert (answer["body"]["temperature"], answer["body"]["max_tokens"]) == (0.0, 131072)
    assert "chat_template_kwargs" not in answer["body"]
    assert (summary["adapter"], summary["body"]["messages"]) == ("L2", [
        {"role": "system", "content": IDENTITY},
        {"role": "user", "content": "please fix the build \n"},
        {"role": "assistant", "content": "Fixed the build."},
        {"role": "user", "content": "Tell in one line what you just did."}])
    assert (summary["body"]["temperature"], summary["body"]["max_tokens"]) == (0, 192)
    assert summary["body"]["chat_template_kwargs"] == {"enable_thinking": False}
    # The second turn, on another adapter: its own view, the first turn as the user's
    # message and its summary; the identity still heads it.
    # (mol's own wording of the other adapter's summary: the reference's is not copied).
    assert engine.requests_for("L0")[-2]["body"]["messages"] == [
        {"role": "system", "content": IDENTITY},
        {"role": "user", "content": "please fix the build \n"},
        {"role": "assistant", "content": "[L2] Fixed a build."},
        {"role": "user", "content": "  hello there"}]
    # One conversation, one affinity value, on every request.
    keys = {r["headers"].get("x-smg-routing-key") for r in engine.requests}
    assert keys == {h.conversation.id}
    assert engine.unused_rules() == []


async def test_a_reasoning_effort_switches_the_answer_hops_thinking(tmp_path):
    artifact = imported(tmp_path)
    async with ScriptedEngine.serve(SCRIPT) as engine, session(artifact, engine) as h:
        await h.turn("please fix the build", params={"reasoning_effort": "none",
                                                     "thinking": False})
        await h.turn("hello there", params={"reasoning_effort": "high", "thinking": True})
    off, on = (r for r in engine.requests if r["constraint"] is None
               and r["body"]["messages"][-1]["content"] in ("please fix the build",
                                                            "hello there"))
    assert off["body"]["chat_template_kwargs"] == {"enable_thinking": False}
    assert off["body"]["reasoning_effort"] == "none" and off["thinking"] is False
    assert on["body"]["chat_template_kwargs"] == {"enable_thinking": True}
    assert on["body"]["reasoning_effort"] == "high" and on["thinking"] is True
    assert "thinking" not in off["body"] and "thinking" not in on["body"]


async def test_no_affinity_header_unless_the_artifact_names_one(tmp_path):
    artifact = imported(tmp_path)
    text = (tmp_path / "out" / "tall.toml").read_text()
    (tmp_path / "out" / "tall.toml").write_text(
        text.replace('affinity_header = "X-SMG-Routing-Key"\n', ""))
    artifact = load(tmp_path / "out" / "tall.toml")
    assert artifact.doc.engine.affinity_header is None
    async with ScriptedEngine.serve(SCRIPT) as engine, session(artifact, engine) as h:
        await h.turn("please fix the build")
    assert all("x-smg-routing-key" not in r["headers"] for r in engine.requests)
