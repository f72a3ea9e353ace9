"""Trajectories: an episode's full record as JSON lines, and reading them back.

Every line is one JSON object with a ``kind``, in the order things happened:

- ``episode``: the header (format, task, task digest, epoch, HCP digest, agent, adapter
  pin, instruction, mol version);
- ``sandbox``: a command or file operation outside any tool call (setup, oracle, verifier);
- ``catalog``: tools an adapter was offered by toolsets (MCP servers), with their specs;
- ``engine``: one engine request as mol sent it (``request``: adapter, messages, tools,
  params, choices) with the hop it served (``purpose``) and the reply (``reply``: content,
  tool calls, finish reason, usage; streaming folded), an ``error``, or ``cancelled``;
- ``tool``: one tool run: call id, adapter, name, source, the arguments it got, its
  ``result`` (content, is_error) or ``raised`` message or ``cancelled``, and the
  ``sandbox`` operations it made;
- ``event``: route decisions, tool calls and results as the model saw them, hook verdicts,
  the answer, the summary, errors (``mol.core.events``; no deltas or timings);
- ``verifier``: the verifier's exit code, reward and output;
- ``result``: outcome, reward, reason, steps, tokens, and the HCP paths the episode read.

Nothing time-dependent is recorded (timings live in the results store), and records of
tool calls that ran concurrently are put in the order of the reply that asked for them,
so the same episode against the same scripted engine records the same bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mol.core.errors import EvalError

FORMAT = 1
"""Version of the trajectory format (the ``episode`` record's ``format``)."""

_CALL_ID = re.compile(r"^call_[A-Za-z0-9_.-]+_[0-9a-f]+$")


def dumps(value: Any) -> str:
    """Canonical JSON: sorted keys, no insignificant whitespace, UTF-8 as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def normalized(request: dict[str, Any]) -> dict[str, Any]:
    """``request`` with mol's random tool call ids replaced by ``call#1``, ``call#2``... in
    order of appearance: two runs of one episode send equal requests up to those ids."""
    names: dict[str, str] = {}

    def name(call_id: Any) -> Any:
        if not isinstance(call_id, str) or not _CALL_ID.match(call_id):
            return call_id
        return names.setdefault(call_id, f"call#{len(names) + 1}")

    messages = []
    for message in request.get("messages") or []:
        message = dict(message)
        if "tool_call_id" in message:
            message["tool_call_id"] = name(message["tool_call_id"])
        if message.get("tool_calls"):
            message["tool_calls"] = [{**call, "id": name(call.get("id"))}
                                     for call in message["tool_calls"]]
        messages.append(message)
    return {**request, "messages": messages}


@dataclass
class Trajectory:
    """A parsed trajectory with accessors for what replay and reports need."""

    records: list[dict[str, Any]]
    path: Path | None = None
    header: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.records or self.records[0].get("kind") != "episode":
            raise EvalError(f"{self.path or 'trajectory'}: does not start with an episode "
                            "record")
        self.header = self.records[0]
        if self.header.get("format") != FORMAT:
            raise EvalError(f"{self.path or 'trajectory'}: format {self.header.get('format')}"
                            f" is not {FORMAT}, which this mol reads")

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The records of one kind, in order."""
        return [record for record in self.records if record.get("kind") == kind]

    @property
    def result(self) -> dict[str, Any]:
        """The ``result`` record (empty when the episode did not finish recording)."""
        found = self.of("result")
        return found[-1] if found else {}

    def catalog(self) -> dict[str, list[dict[str, Any]]]:
        """Adapter -> the toolset tools it was offered."""
        return {record["adapter"]: record["tools"] for record in self.of("catalog")}


def parse(lines: Iterable[str], path: Path | None = None) -> Trajectory:
    """A trajectory from its JSON lines."""
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise EvalError(f"{path or 'trajectory'}:{number}: not JSON ({exc.msg})") from None
    return Trajectory(records, path)


def read(path: Path) -> Trajectory:
    """The trajectory in a file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise EvalError(f"{path}: cannot read the trajectory: {exc.strerror or exc}") from exc
    return parse(text.splitlines(), path)
