"""Skills through the harness and the scripted engine, checked on what went over the wire."""

from __future__ import annotations

import itertools

import anyio
import pytest

from mol.hcp.loader import load
from mol.plugins.catalog import catalog_text
from mol.plugins.manager import PluginManager
from mol.runtime import Runtime
from mol.runtime.testing import ScriptedEngine

ARTIFACT = """\
schema_version = 1
name = "skills-e2e"
[engine]
routing_constraint = "structured_outputs"
[router]
prompt = "Pick the adapter."
[adapters.L1]
prompt = "You are the agent."
skills = ["personal-agent"]
[adapters.L2]
prompt = "You are the coder."
tools.allow = ["read_file"]
skills = ["terminal-basics", "kit"]
[summary]
enabled = false
[skills]
paths = ["skills"]
"""

SCRIPT = {
    "L0": [
        {"constrained": True, "when": "bug", "reply": "L2", "times": -1},
        {"constrained": True, "when": "plan", "reply": "L1"},
    ],
    "L2": [
        {"when": "fix the bug", "tool_calls": [{"name": "load_skill",
                                                "arguments": {"name": "kit"}}]},
        {"when": "Use the kit", "tool_calls": [{"name": "read_skill_file", "arguments": {
            "skill": "kit", "path": "references/guide.md"}}]},
        {"when": "Guide text", "reply": "Fixed it with the kit."},
        {"when": "another bug", "reply": "Second answer."},
    ],
    "L1": [
        {"when": "plan", "tool_calls": [{"name": "load_skill", "arguments": {"name": "kit"}}]},
        {"when": "not available to adapter L1", "reply": "I cannot use that skill."},
    ],
}


@pytest.fixture
def artifact(tmp_path, make_skill):
    make_skill(tmp_path / "skills", "kit", body="# Kit\n\nUse the kit.\n",
               files={"references/guide.md": "Guide text.\n"})
    (tmp_path / "a.toml").write_text(ARTIFACT)
    return load(tmp_path / "a.toml")


async def converse(artifact):
    """Three turns (L2, L2, L1) through a real harness and the scripted engine."""
    plugins = PluginManager([], builtin=("mol.plugins.builtin.skills",))
    async with ScriptedEngine.serve(SCRIPT) as engine:
        runtime = Runtime(artifact, engine_url=engine.base_url, plugins=plugins)
        async with runtime.session() as harness:
            with anyio.fail_after(60):
                turns = [await harness.turn(text) for text in
                         ("please fix the bug", "and another bug", "plan my week")]
        assert engine.unused_rules() == []
        return turns, engine.requests_for("L2"), engine.requests_for("L1"), engine.requests_for("L0")


def _tool_messages(request):
    return [m for m in request["body"]["messages"] if m["role"] == "tool"]


@pytest.mark.anyio
async def test_catalog_stable_load_skill_pinned_and_unlisted_skill_refused(artifact):
    (first, second, third), l2, l1, l0 = await converse(artifact)
    assert (first.adapter, first.answer) == ("L2", "Fixed it with the kit.")
    assert (second.answer, third.adapter) == ("Second answer.", "L1")
    assert third.answer == "I cannot use that skill."

    # The catalog is in L2's system prompt, byte-identical in all four requests over two turns.
    systems = [request["body"]["messages"][0] for request in l2]
    assert len(systems) == 4 and all(s == systems[0] for s in systems)
    assert systems[0]["role"] == "system"
    assert systems[0]["content"].endswith(catalog_text(artifact, "L2"))
    assert "- kit: Test skill kit; use it in tests.\n- terminal-basics: " in systems[0]["content"]
    assert "Use the kit." not in systems[0]["content"]  # bodies stay out of the prompt
    assert [t["function"]["name"] for t in l2[0]["body"]["tools"]] == [
        "load_skill", "read_skill_file"]  # implicitly allowed for an adapter with skills

    # load_skill's result went back to L2, the adapter that asked, without routing.
    assert _tool_messages(l2[1])[-1]["content"].startswith(
        "# Skill: kit\n\n# Kit\n\nUse the kit.\n")
    assert _tool_messages(l2[2])[-1]["content"] == "Guide text.\n"
    assert len(l0) == 3  # one routing request per turn, none for tool results

    # L1 lists only personal-agent: L2's skill is refused, and L1's catalog names only its own.
    refused = _tool_messages(l1[1])[-1]
    assert refused["content"] == ("Error: skill 'kit' is not available to adapter L1; its skills "
                                  "are: personal-agent.")
    assert "- personal-agent: " in l1[0]["body"]["messages"][0]["content"]
    assert "- kit:" not in l1[0]["body"]["messages"][0]["content"]


@pytest.mark.anyio
async def test_each_request_with_skills_extends_the_previous_one(artifact):
    # The catalog and skill results never rewrite history: the prefix cache keeps hitting.
    _, l2, _, _ = await converse(artifact)
    for before, after in itertools.pairwise(l2):
        old, new = before["body"]["messages"], after["body"]["messages"]
        assert new[:len(old)] == old
        assert len(new) > len(old)
