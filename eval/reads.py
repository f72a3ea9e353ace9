"""Which parts of the HCP an episode read, as JSON Pointers into the document.

Derived from the trajectory, so an edit's reach can be judged without running anything:
an edit at pointer P can change an episode only if one of its reads is a prefix of P or
P a prefix of it. ``$skills/NAME`` stands for the folder of skill NAME (as in the
digest's canonical form).

- every ``mol`` episode: ``/engine``, ``/sandbox``, ``/plugins``, ``/model`` (the identity
  prompt and the names templated into prompts), ``/views``, ``/bundles`` and ``/hooks``
  (the hooks of a turn run on every turn);
- a routed turn: ``/router``, and ``/adapters/NAME/description`` of every declared
  adapter (templated into the router prompt);
- each adapter that answered: ``/adapters/NAME`` (its prompt, params, tool policy, skills,
  MCP servers and budgets all shape its requests), ``/skills`` and ``/$skills/S`` for each
  skill it lists (their descriptions are in its catalog);
- the summary hop: ``/summary``;
- any tool call: ``/hooks``; MCP tools offered or called: ``/mcp_servers/SERVER``; a
  skill loaded or read: ``/$skills/S``;
- an ``oracle`` episode: ``/sandbox`` only.
"""

from __future__ import annotations

from typing import Any

from mol.eval.trajectory import Trajectory

SKILL_TOOLS = {"load_skill": "name", "read_skill_file": "skill"}
"""Built-in skill tools and the argument naming the skill."""


def hcp_reads(trajectory: Trajectory, artifact: Any) -> list[str]:
    """The sorted JSON Pointers of what the episode's HCP parts read."""
    if trajectory.header.get("agent") == "oracle":
        return ["/sandbox"]
    reads = {"/engine", "/sandbox", "/plugins", "/model", "/views", "/bundles", "/hooks"}
    for record in trajectory.of("engine"):
        purpose, adapter = record.get("purpose"), record["request"]["adapter"]
        if purpose == "route":
            reads.add("/router")
            reads |= {f"/adapters/{name}/description" for name in artifact.doc.adapters}
        elif purpose == "summary":
            reads.add("/summary")
        elif purpose == "answer":
            reads |= _adapter(adapter, artifact)
    for adapter, tools in trajectory.catalog().items():
        reads |= _adapter(adapter, artifact)
        reads |= {f"/mcp_servers/{t['source'][4:]}" for t in tools
                  if t["source"].startswith("mcp:")}
    for record in trajectory.of("tool"):
        reads.add("/hooks")
        if record["source"].startswith("mcp:"):
            reads.add(f"/mcp_servers/{record['source'][4:]}")
        skill = (record.get("arguments") or {}).get(SKILL_TOOLS.get(record["name"], ""))
        if isinstance(skill, str) and record["source"].startswith("plugin:"):
            reads.add(f"/$skills/{skill}")
    if any(r["event"]["type"] == "tool_call" for r in trajectory.of("event")):
        reads.add("/hooks")
    return sorted(reads)


def _adapter(name: str, artifact: Any) -> set[str]:
    found = {f"/adapters/{name}"}
    try:
        skills = artifact.doc.adapter(name).skills
    except (AttributeError, KeyError):  # an adapter the artifact does not declare
        return found
    if skills:
        found.add("/skills")
    return found | {f"/$skills/{skill}" for skill in skills}
