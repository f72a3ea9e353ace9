"""Where candidates come from: a file of patches, or an adapter asked through the engine.

- ``file:PATCHES.json``: one patch (an array of RFC 6902 operations), an array of patches,
  or an array of ``{"patch": [...], "note": "..."}`` objects (tests, people, external
  optimizers).
- ``adapter:NAME``: the adapter gets, as one request through the ``Engine`` protocol, the
  evolvable parts of the evolve document (by JSON Pointer) and the failed episodes of the
  run, trimmed (instruction, tool calls and results, answer, the verifier's output), and
  answers a JSON array of ``{"note", "patch"}`` objects. What it answers is parsed here and
  validated by ``mol.eval.evolve.propose``; an answer that is not such an array yields no
  proposals and says why.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mol.core.errors import UsageError

MAX_FAILED = 8
"""Failed episodes shown to an adapter proposer."""
CUT = 400
"""Characters kept of each text in a trimmed trajectory."""
SYSTEM = (
    "You propose edits to an HCP, the configuration of an agent harness, so that it solves "
    "more tasks of an evaluation suite without breaking the ones it solves. An edit is an "
    "RFC 6902 JSON Patch whose paths are JSON Pointers into the document parts shown; only "
    "those parts may change. Answer with only a JSON array of at most {n} candidates, each "
    '{{"note": "why this edit helps", "patch": [operations]}}, and nothing else.')


@dataclass
class Proposal:
    """A candidate edit before validation."""

    patch: Any
    note: str = ""
    proposer: str = ""


def parse_proposer(spec: str) -> tuple[str, str]:
    """``("file", PATH)`` or ``("adapter", NAME)`` from ``--proposer``."""
    kind, _, value = spec.partition(":")
    if kind not in ("file", "adapter") or not value:
        raise UsageError(f"--proposer {spec!r}: use file:PATCHES.json or adapter:NAME")
    return kind, value


def read_file(path: Path) -> list[Proposal]:
    """The proposals in a patches file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not valid JSON: {exc}") from exc
    found = proposals_in(data, f"file:{path}")
    if found is None:
        raise UsageError(f"{path}: expected a patch (an array of operations), an array of "
                         "patches, or an array of {\"patch\", \"note\"} objects")
    return found


def proposals_in(data: Any, proposer: str) -> list[Proposal] | None:
    """The proposals a JSON value holds, or None when it holds none in any known shape."""
    if not isinstance(data, list):
        return None
    if data and all(isinstance(op, dict) and "op" in op for op in data):
        return [Proposal(data, "", proposer)]
    found = []
    for item in data:
        if isinstance(item, dict) and "patch" in item:
            found.append(Proposal(item["patch"], str(item.get("note") or ""), proposer))
        else:
            found.append(Proposal(item, "", proposer))  # validation says what is wrong
    return found


def parse_reply(text: str, proposer: str) -> tuple[list[Proposal], str]:
    """The proposals in an adapter's reply, and what was wrong when there are none."""
    body = text.strip()
    fenced = re.search(r"```(?:json)?\s*\n(.*?)```", body, re.S)
    if fenced:
        body = fenced.group(1).strip()
    start, end = body.find("["), body.rfind("]")
    if start < 0 or end < start:
        return [], f"the reply holds no JSON array: {text[:200]!r}"
    try:
        data = json.loads(body[start:end + 1])
    except json.JSONDecodeError as exc:
        return [], f"the reply's array is not valid JSON ({exc})"
    found = proposals_in(data, proposer)
    return (found, "") if found else ([], "the reply's array holds no candidates")


async def ask_adapter(adapter: str, engine: Any, parts: dict[str, Any], failed: str,
                      patterns: list[str], n: int, params: dict[str, Any]) -> tuple[
                          list[Proposal], str, str]:
    """Ask ``adapter`` for up to ``n`` candidates; returns what it answered (all of it: the
    caller keeps ``n``), what was wrong with the reply (if anything) and the reply's text."""
    user = ("# The document parts you may edit (JSON Pointer -> value)\n\n"
            f"Evolvable paths: {', '.join(patterns)}\n\n```json\n"
            f"{json.dumps(parts, indent=1, ensure_ascii=False)}\n```\n\n"
            f"# Episodes that failed\n\n{failed or 'None failed.'}\n")
    messages = [{"role": "system", "content": SYSTEM.format(n=n)},
                {"role": "user", "content": user}]
    completion = await engine.complete(adapter, messages, params=params)
    proposals, problem = parse_reply(completion.content, f"adapter:{adapter}")
    return proposals, problem, completion.content


def failed_episodes(run: Path, limit: int = MAX_FAILED) -> str:
    """The run's failed episodes, trimmed, as text for a proposer (one per task)."""
    from mol.eval.store import Store
    from mol.eval.trajectories.format import read

    with Store(run, create=False) as store:
        episodes = [e for e in store.episodes() if e.outcome != "pass" and e.trajectory]
    seen: set[str] = set()
    sections = []
    for episode in episodes:
        if episode.task in seen or len(sections) >= limit:
            continue
        seen.add(episode.task)
        sections.append(trimmed(read(run / episode.trajectory), episode))
    return "\n\n".join(sections)


def _cut(text: Any, limit: int = CUT) -> str:
    text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + " [...]"


def trimmed(trajectory: Any, episode: Any) -> str:
    """One episode in a few lines: task, outcome, instruction, what the adapter did, the
    verifier's verdict."""
    lines = [f"## {episode.task} ({episode.outcome}, reward {episode.reward}): "
             f"{_cut(episode.error, 200)}",
             f"Instruction: {_cut(trajectory.header.get('instruction', ''))}"]
    for record in trajectory.records:
        if record.get("kind") == "tool":
            result = record.get("result") or {}
            lines.append(f"- {record['adapter']} called {record['name']} "
                         f"{_cut(record.get('arguments'), 300)} -> "
                         f"{_cut(result.get('content', record.get('raised', '')))}")
        elif record.get("kind") == "event" and record["event"].get("type") == "answer":
            lines.append(f"- answered: {_cut(record['event'].get('text', ''))}")
    for record in trajectory.of("verifier"):
        lines.append(f"Verifier (exit {record.get('exit_code')}): "
                     f"{_cut((record.get('output') or '')[-CUT:])}")
    return "\n".join(lines)
