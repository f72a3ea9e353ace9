"""An episode's trajectory as an ATIF trajectory (Harbor's Agent Trajectory Interchange
Format), one JSON file per episode.

The mapping (docs/eval.md, "ATIF trajectories"):

- the task's instruction is the first step (``source: user``);
- each engine request is an ``agent`` step: the reply's text as ``message``, its reasoning,
  its tool calls (under mol's call ids) and their results as the ``observation`` (what
  the model read back), token usage as ``metrics``, the adapter's engine name as
  ``model_name``; ``extra.mol`` says the hop (``route``, ``answer``, ``summary``...), the
  adapter, and the turn's other events of that step (the route decision, the summary,
  hook verdicts, errors);
- sandbox commands outside tool calls are ``system`` steps (the oracle's solution an
  ``agent`` step with ``llm_call_count: 0``: a deterministic dispatch), the verifier a
  ``system`` step with its output and reward;
- ``final_metrics`` holds the episode's tokens, the root ``extra.mol`` its row (outcome,
  reward, reason, HCP digests, where it ran).

``ATIF_VERSION`` is the newest version the Harbor release pinned by the tests validates
(tests/eval/test_exports_atif.py checks it against ``harbor.models.trajectories``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mol.eval.exports.source import RunSource, out_folder, write_text
from mol.eval.store import Episode
from mol.eval.trajectories.format import Trajectory
from mol.eval.verifier import MOUNTS

TESTS = MOUNTS[0]
"""Where the verifier uploads the task's tests (its first operation)."""

ATIF_VERSION = "ATIF-v1.8"
"""The ``schema_version`` written: the default (newest) of Harbor's ``Trajectory`` model."""

_OP_ARGUMENTS = ("command", "path", "folder", "timeout")
"""The fields of a sandbox operation that were its arguments (the rest is its outcome)."""


def file_name(task: str, epoch: int) -> str:
    """The file an episode's ATIF trajectory is written to."""
    return f"{task.replace('/', '__')}.{epoch}.json"


def export_atif(source: RunSource, out: Path) -> list[Path]:
    """Write every recorded episode of ``source`` into ``out``; the files written."""
    folder = out_folder(out)
    engine_names = _engine_names(source)
    written = []
    for episode, trajectory in source.episodes:
        data = to_atif(episode, trajectory, engine_names, source.folder)
        path = folder / file_name(episode.task, episode.epoch)
        write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        written.append(path)
    return written


def _engine_names(source: RunSource) -> dict[str, str]:
    doc = source.artifact().doc
    return {name: doc.engine_name(name) for name in doc.adapters}


def to_atif(episode: Episode, trajectory: Trajectory, engine_names: dict[str, str],
            run: Path | None = None) -> dict[str, Any]:
    """One episode as an ATIF trajectory (a JSON-able dict)."""
    header = trajectory.header
    builder = _Builder(header, engine_names)
    for record in trajectory.records[1:]:
        builder.add(record)
    steps = builder.finish()
    result = trajectory.result
    tokens = result.get("tokens") or {}
    agent: dict[str, Any] = {"name": "oracle" if header.get("agent") == "oracle" else "mol",
                             "version": str(header.get("mol_version") or "")}
    if builder.tools:
        agent["tool_definitions"] = builder.tools
    agent["extra"] = {"mol": {"hcp_digest": episode.hcp_digest,
                              "behaviour_digest": episode.behaviour_digest,
                              "adapter_pin": episode.adapter or None,
                              "tools_by_adapter": builder.offered}}
    return {
        "schema_version": ATIF_VERSION,
        "session_id": f"{run.name if run else 'run'}/{episode.task}.{episode.epoch}",
        "trajectory_id": f"{episode.task}.{episode.epoch}",
        "agent": agent,
        "steps": steps,
        "final_metrics": {"total_prompt_tokens": tokens.get("prompt", episode.prompt_tokens),
                          "total_completion_tokens": tokens.get(
                              "completion", episode.completion_tokens),
                          "total_cached_tokens": tokens.get("cached", episode.cached_tokens),
                          "total_steps": len(steps),
                          "extra": {"mol_model_calls": episode.steps}},
        "extra": {"mol": _row(episode, header, run)},
    }


def _row(episode: Episode, header: dict[str, Any], run: Path | None) -> dict[str, Any]:
    return {"run": str(run) if run else None, "task": episode.task,
            "task_digest": header.get("task_digest"), "epoch": episode.epoch,
            "agent": episode.agent, "outcome": episode.outcome, "reward": episode.reward,
            "reason": episode.reason, "error": episode.error, "placement": episode.placement,
            "wall_sec": episode.wall_sec, "agent_sec": episode.agent_sec,
            "started": episode.started, "model": episode.model, "reads": episode.reads}


class _Builder:
    """Steps from a trajectory's records, in order."""

    def __init__(self, header: dict[str, Any], engine_names: dict[str, str]) -> None:
        self.engine_names = engine_names
        self.oracle = header.get("agent") == "oracle"
        self.steps: list[dict[str, Any]] = [
            {"source": "user", "message": header.get("instruction") or "",
             "extra": {"mol": {"hop": "instruction"}}}]
        self.tools: list[dict[str, Any]] = []
        """The tools the first answering adapter was offered (OpenAI function schemas)."""
        self.offered: dict[str, list[str]] = {}
        self._tool_records: dict[str, dict[str, Any]] = {}

    @property
    def current(self) -> dict[str, Any]:
        return self.steps[-1]

    def add(self, record: dict[str, Any]) -> None:
        kind = record.get("kind")
        if kind == "engine":
            self._engine(record)
        elif kind == "event":
            self._event(record["event"])
        elif kind == "tool":
            self._tool_records[record.get("call_id") or ""] = record
        elif kind == "sandbox":
            self._sandbox(record)
        elif kind == "verifier":
            self._verifier(record)

    def _engine(self, record: dict[str, Any]) -> None:
        request = record.get("request") or {}
        adapter = request.get("adapter") or ""
        purpose = record.get("purpose") or ""
        if purpose == "answer" and request.get("tools") and adapter not in self.offered:
            self.offered[adapter] = [t.get("function", {}).get("name")
                                     for t in request["tools"]]
            if not self.tools:
                self.tools = request["tools"]
        reply = record.get("reply")
        step: dict[str, Any] = {"source": "agent", "message": (reply or {}).get("content") or "",
                                "model_name": self.engine_names.get(adapter, adapter),
                                "llm_call_count": 1,
                                "extra": {"mol": {"hop": purpose, "adapter": adapter}}}
        if reply is None:
            step["extra"]["mol"]["error"] = record.get("error") or (
                {"cancelled": True} if record.get("cancelled") else None)
        else:
            if reply.get("reasoning"):
                step["reasoning_content"] = reply["reasoning"]
            step["metrics"] = _metrics(reply.get("usage") or {})
            step["extra"]["mol"]["finish_reason"] = reply.get("finish_reason")
        self.steps.append(step)

    def _event(self, event: dict[str, Any]) -> None:
        step = self.current
        kind = event.get("type")
        if kind == "tool_call" and step["source"] == "agent" and "llm_call_count" in step:
            step.setdefault("tool_calls", []).append(_tool_call(event))
        elif kind == "tool_result" and any(c["tool_call_id"] == event.get("call_id")
                                           for c in step.get("tool_calls", [])):
            step.setdefault("observation", {"results": []})["results"].append(
                {"source_call_id": event["call_id"], "content": event.get("content") or "",
                 "extra": {"is_error": bool(event.get("is_error")), "name": event.get("name")}})
        else:
            step["extra"]["mol"].setdefault("events", []).append(event)

    def _sandbox(self, record: dict[str, Any]) -> None:
        step = self.current
        if step["extra"]["mol"].get("hop") != "sandbox":
            step = {"source": "agent" if self.oracle else "system", "message": "",
                    "extra": {"mol": {"hop": "sandbox", "operations": []}}}
            if self.oracle:
                step["llm_call_count"] = 0
            self.steps.append(step)
        op = {k: v for k, v in record.items() if k != "kind"}
        step["extra"]["mol"]["operations"].append(op)

    def _verifier(self, record: dict[str, Any]) -> None:
        step = self.current
        operations: list[dict[str, Any]] = []
        if step["extra"]["mol"].get("hop") == "sandbox":
            # The verifier's own operations start with its upload of the task's tests.
            before = step["extra"]["mol"]["operations"]
            start = max((i for i, op in enumerate(before) if op.get("op") == "upload"
                         and op.get("folder") == TESTS), default=len(before))
            operations = before[start:]
            del before[start:]
            if not before:
                self.steps.pop()
        reward = record.get("reward")
        self.steps.append({"source": "system",
                           "message": f"verifier: exit code {record.get('exit_code')}, "
                                      f"reward {reward}",
                           "observation": {"results": [{"content": record.get("output") or ""}]},
                           "extra": {"mol": {"hop": "verifier", "reward": reward,
                                             "exit_code": record.get("exit_code"),
                                             "operations": operations}}})

    def finish(self) -> list[dict[str, Any]]:
        """The steps, numbered, with the sandbox steps' messages and the tool records' facts
        (source, sandbox operations) beside the results the model read."""
        for number, step in enumerate(self.steps, start=1):
            step["step_id"] = number
            mol = step["extra"]["mol"]
            if mol.get("hop") == "sandbox":
                _sandbox_step(step, number, self.oracle)
            for result in (step.get("observation") or {}).get("results", []):
                tool = self._tool_records.get(result.get("source_call_id") or "")
                if tool is not None:
                    result["extra"].update(source=tool.get("source"),
                                           sandbox=tool.get("sandbox") or [])
        return self.steps


def _sandbox_step(step: dict[str, Any], number: int, oracle: bool) -> None:
    """A group of sandbox operations: the oracle's as its tool calls, else as what the
    system did before the verifier."""
    operations = step["extra"]["mol"]["operations"]
    step["message"] = "; ".join(
        f"{op.get('op')} {op.get('command') or op.get('path') or op.get('folder') or ''}".strip()
        for op in operations)
    results = [{"content": op.get("output") or op.get("error") or "",
                "extra": {k: v for k, v in op.items() if k not in _OP_ARGUMENTS}}
               for op in operations]
    if oracle:
        calls = [{"tool_call_id": f"oracle-{number}-{i}", "function_name": f"sandbox.{op['op']}",
                  "arguments": {k: op[k] for k in _OP_ARGUMENTS if k in op}}
                 for i, op in enumerate(operations, start=1)]
        step["tool_calls"] = calls
        for call, result in zip(calls, results, strict=True):
            result["source_call_id"] = call["tool_call_id"]
    step["observation"] = {"results": results}
    del step["extra"]["mol"]["operations"]  # each is a result's extra now


def _tool_call(event: dict[str, Any]) -> dict[str, Any]:
    text = event.get("arguments") or ""
    try:
        arguments = json.loads(text) if text else {}
    except ValueError:
        arguments = None
    call = {"tool_call_id": event.get("call_id") or "", "function_name": event.get("name") or "",
            "arguments": arguments if isinstance(arguments, dict) else {}}
    if not isinstance(arguments, dict):
        call["extra"] = {"arguments_text": text}  # what the model wrote, not a JSON object
    return call


def _metrics(usage: dict[str, Any]) -> dict[str, Any]:
    return {"prompt_tokens": usage.get("prompt_tokens", 0),
            "completion_tokens": usage.get("completion_tokens", 0),
            "cached_tokens": usage.get("cached_tokens", 0)}
