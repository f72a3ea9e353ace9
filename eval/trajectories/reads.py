"""Which parts of the HCP an episode read, as JSON Pointers into the document.

Derived from the trajectory, so an edit's reach can be judged without running anything:
an edit at pointer P can change an episode only if one of its reads is a prefix of P or
P a prefix of it (``mol.hcp.evolvable.related``). ``/$skills/NAME`` stands for the folder of
skill NAME (as in the digest's canonical form), ``/adapters/$keys`` for which adapters are
declared (adding or removing one touches it).

- every ``mol`` episode: ``/engine``, ``/sandbox``, ``/plugins``, ``/model`` (the identity
  prompt and the names templated into prompts), ``/views``, ``/bundles``, ``/hooks`` (the
  hooks of a turn run on every turn) and ``/summary`` (whether and how the turn is
  summarized);
- a routed turn: ``/router``, ``/adapters/NAME/description`` of every routing label (the
  router prompt lists them), and ``/adapters/$keys`` when ``router.labels`` is unset (the
  labels are then every declared adapter);
- a turn whose text is a slash command: ``/adapters/$keys`` and every adapter's
  ``bundles`` (the adapters using the command's bundle are the only labels);
- every engine request: ``/adapters/NAME/engine_name`` and ``/adapters/NAME/lora`` of its
  adapter (the model it reaches, and its weights); a request of no known hop (MCP sampling): all of ``/adapters/NAME``;
- each adapter that answered: ``/adapters/NAME`` (its prompt, params, tool policy, skills,
  MCP servers and budgets all shape its requests), ``/skills`` and ``/$skills/S`` for each
  skill it lists (their descriptions are in its catalog), ``/mcp_servers/S`` for each
  server it lists (enabled or not: enabling one changes its tools);
- a prompt using ``{{ADAPTER_DESCRIPTIONS}}`` or ``{{ROUTE_LABELS}}`` (the answering
  adapter's, the summary's or the identity): ``/router/labels``, ``/adapters/$keys`` and
  the labels' descriptions;
- MCP tools offered or called: ``/mcp_servers/SERVER``; a skill loaded or read:
  ``/$skills/S``;
- an ``oracle`` episode: ``/sandbox`` only.

``opaque_reads`` are the reads a replay cannot check (it stubs them out with recordings):
an edit there may change the episode even when its replay stays identical.
"""

from __future__ import annotations

from typing import Any

from mol.eval.trajectories.format import Trajectory
from mol.hcp.evolvable import KEYS, pointer

SKILL_TOOLS = {"load_skill": "name", "read_skill_file": "skill"}
"""Built-in skill tools and the argument naming the skill."""

ALWAYS = ("/engine", "/sandbox", "/plugins", "/model", "/views", "/bundles", "/hooks",
          "/summary")
"""What every ``mol`` episode reads."""

OPAQUE = ("/engine", "/sandbox", "/mcp_servers", "/adapters/*/engine_name",
          "/adapters/*/lora")
"""What replay answers from the recording instead of reading: the engine's wire form, model
and weights (requests are compared before they reach it), the sandbox (every command's output is
recorded) and MCP servers (their tools and results are recorded)."""

TEMPLATED = ("{{ADAPTER_DESCRIPTIONS}}", "{{ROUTE_LABELS}}")


def hcp_reads(trajectory: Trajectory, artifact: Any) -> list[str]:
    """The sorted JSON Pointers of what the episode's HCP parts read."""
    if trajectory.header.get("agent") == "oracle":
        return ["/sandbox"]
    doc = artifact.doc
    reads = set(ALWAYS)
    if str(trajectory.header.get("instruction") or "").startswith("/"):
        reads.add(pointer("adapters", KEYS))
        reads |= {pointer("adapters", name, "bundles") for name in doc.adapters}
    for record in trajectory.of("engine"):
        purpose, adapter = record.get("purpose"), record["request"]["adapter"]
        reads |= {pointer("adapters", adapter, "engine_name"),
                  pointer("adapters", adapter, "lora")}
        if purpose == "route":
            reads |= _routing(artifact)
        elif purpose == "summary":
            reads |= _templated(artifact, "summary.prompt")
        elif purpose == "answer":
            reads |= _adapter(adapter, artifact)
        else:
            reads.add(pointer("adapters", adapter))
    for adapter, tools in trajectory.catalog().items():
        reads |= _adapter(adapter, artifact)
        reads |= {pointer("mcp_servers", t["source"][4:]) for t in tools
                  if t["source"].startswith("mcp:")}
    for record in trajectory.of("tool"):
        if record["source"].startswith("mcp:"):
            reads.add(pointer("mcp_servers", record["source"][4:]))
        skill = _skill_of(record)
        if skill is not None:
            reads.add(pointer("$skills", skill))
    return sorted(reads)


def opaque_reads(trajectory: Trajectory, reads: list[str]) -> list[str]:
    """The reads of an episode that its replay cannot check: ``OPAQUE`` ones, and the skills
    whose files a tool copied into the sandbox (replay answers that copy from the
    recording)."""
    from mol.hcp.evolvable import within

    found = {read for read in reads if any(within(p, read) for p in OPAQUE)}
    for record in trajectory.of("tool"):
        skill = _skill_of(record)
        if skill is not None and (record.get("arguments") or {}).get("to_workspace"):
            found.add(pointer("$skills", skill))
    return sorted(found)


def _skill_of(record: dict[str, Any]) -> str | None:
    """The skill a built-in skill tool's call names, if it is one."""
    skill = (record.get("arguments") or {}).get(SKILL_TOOLS.get(record["name"], ""))
    return skill if isinstance(skill, str) and record["source"].startswith("plugin:") else None


def _routing(artifact: Any) -> set[str]:
    """What a route request reads: the router and the labels' names and descriptions."""
    doc = artifact.doc
    found = {"/router"} | {pointer("adapters", name, "description")
                           for name in doc.route_labels}
    if not doc.router.labels:
        found.add(pointer("adapters", KEYS))
    return found


def _templated(artifact: Any, key: str) -> set[str]:
    """What the placeholders of the prompt at ``key`` (and of the identity prompt) read."""
    texts = [_raw_prompt(artifact, key), _raw_prompt(artifact, "model.identity")]
    if not any(mark in text for text in texts for mark in TEMPLATED):
        return set()
    return _routing(artifact) - {"/router"} | {"/router/labels", pointer("adapters", KEYS)}


def _raw_prompt(artifact: Any, key: str) -> str:
    """The prompt at ``key`` as written (placeholders not rendered), or ``""``."""
    value: Any = artifact.doc
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
    try:
        return artifact.prompt_text(value)
    except (KeyError, AttributeError):
        return ""


def _adapter(name: str, artifact: Any) -> set[str]:
    found = {pointer("adapters", name)}
    try:
        config = artifact.doc.adapter(name)
    except (AttributeError, KeyError):  # an adapter the artifact does not declare
        return found
    if config.skills:
        found.add("/skills")
    found |= {pointer("$skills", skill) for skill in config.skills}
    found |= {pointer("mcp_servers", server) for server in config.mcp_servers}
    return found | _templated(artifact, f"adapters.{name}.prompt")
