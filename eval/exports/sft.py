"""Training data for one adapter from an eval run: one example per answer step of that
adapter (and, for the router adapter, one per route decision), from its own view.

An answer step's messages are the recorded request, turned into the body the engine
received by the run's engine client (``LiteLLMEngine.wire_body``: litellm's own
transformation), followed by the adapter's reply as the next request of its view carries
it (or, for the turn's last reply, as an assistant message). A route example is the route
request followed by the label chosen; ``mol.led_to_success`` says whether the episode
passed. Episodes are filtered by outcome (``passed_only``) and reward (``min_reward``)
before any example is made.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mol.core.errors import EvalError
from mol.eval.exports import examples as ex
from mol.eval.exports.source import RunSource, out_file
from mol.eval.store import Episode
from mol.eval.trajectories.format import Trajectory


@dataclass(frozen=True)
class Filters:
    """Which episodes give examples, and whether prefixes are dropped."""

    passed_only: bool = False
    min_reward: float | None = None
    dedup: bool = True

    def refuses(self, episode: Episode) -> str | None:
        """Why ``episode`` is left out (a count's key), or None."""
        if self.passed_only and episode.outcome != "pass":
            return "not_passed"
        if self.min_reward is not None and (episode.reward is None
                                            or episode.reward < self.min_reward):
            return "below_min_reward"
        return None


def checked_adapter(artifact: Any, adapter: str) -> str:
    """``adapter`` when the HCP declares it; ``EvalError`` listing those it does."""
    names = sorted(artifact.doc.adapters)
    if adapter not in names:
        raise EvalError(f"--adapter {adapter}: not an adapter of the HCP "
                        f"({', '.join(names)})")
    return adapter


def export_sft(source: RunSource, adapter: str, out: Path, filters: Filters) -> dict[str, Any]:
    """Write the examples of ``adapter`` from the run, and the manifest; the manifest."""
    from mol.runtime import LiteLLMEngine

    artifact = source.artifact()
    checked_adapter(artifact, adapter)
    out_file(out)  # before the seconds litellm takes to load
    engine = LiteLLMEngine.from_artifact(artifact)
    router = artifact.doc.router.adapter
    found: list[ex.Example] = []
    left_out: dict[str, int] = {}
    used = 0
    for episode, trajectory in source.episodes:
        why = filters.refuses(episode)
        if why:
            left_out[why] = left_out.get(why, 0) + 1
            continue
        used += 1
        found += episode_examples(engine, episode, trajectory, adapter, route=adapter == router)
    if source.unrecorded:
        left_out["unrecorded"] = len(source.unrecorded)
    meta = source.meta
    described = {"kind": "eval-run", "run": str(source.folder.resolve()),
                 "hcp_name": meta.get("hcp_name"), "hcp_digest": meta.get("hcp_digest"),
                 "behaviour_digest": meta.get("behaviour_digest"), "suite": meta.get("suite"),
                 "agent": meta.get("agent")}
    return ex.write(out, found, adapter=adapter, source=described, filters=asdict(filters),
                    counts={"episodes": {"used": used, "left_out": left_out}})


def episode_examples(engine: Any, episode: Episode, trajectory: Trajectory, adapter: str,
                     route: bool = False) -> list[ex.Example]:
    """The examples of ``adapter`` in one episode (its route decisions too with ``route``)."""
    records = trajectory.records
    facts = {"task": episode.task, "epoch": episode.epoch, "outcome": episode.outcome,
             "reward": episode.reward}
    found = []
    answers = 0
    for index, record in enumerate(records):
        if record.get("kind") != "engine" or "reply" not in record:
            continue
        request = record["request"]
        if request.get("adapter") != adapter:
            continue
        if record.get("purpose") == "answer":
            answers += 1
            reply = _reply_message(records, index)
            found.append(_example(engine, request, reply,
                                  {"kind": "answer", **facts, "step": answers}))
        elif record.get("purpose") == "route" and route:
            decision = _following(records, index, "route")
            if decision is None:
                continue
            label = decision["adapter"]
            found.append(_example(engine, request, {"role": "assistant", "content": label}, {
                "kind": "route", **facts, "label": label, "raw": record["reply"]["content"],
                "route": decision.get("route"), "fallback": bool(decision.get("fallback")),
                "led_to_success": episode.outcome == "pass"}))
    return found


def _example(engine: Any, request: dict[str, Any], reply: dict[str, Any],
             facts: dict[str, Any]) -> ex.Example:
    # The role first, as mol makes messages (a trajectory stores keys sorted).
    messages = [{"role": m.get("role"), **m} for m in request["messages"]]
    if messages and messages[-1].get("role") == "assistant" and facts["kind"] == "route":
        # A prefill layout: the engine continued the assistant message it was given.
        messages[-1] = {**messages[-1], "content": (messages[-1].get("content") or "")
                        + reply["content"]}
    else:
        messages.append({"role": reply.get("role"), **reply})
    body = engine.wire_body(request["adapter"], messages, tools=request.get("tools"),
                            params=request.get("params"), choices=request.get("choices"),
                            extra=request.get("extra"))
    return ex.Example(body["messages"], body.get("tools"), facts)


def _following(records: list[dict[str, Any]], index: int, kind: str) -> dict[str, Any] | None:
    """The first event of type ``kind`` after ``records[index]``, before the next request."""
    for record in records[index + 1:]:
        if record.get("kind") == "engine":
            return None
        event = record.get("event") if record.get("kind") == "event" else None
        if event and event.get("type") == kind:
            return event
    return None


def _reply_message(records: list[dict[str, Any]], index: int) -> dict[str, Any]:
    """The assistant message of the reply to ``records[index]`` as the adapter's view
    carries it: taken from the adapter's next request when that one extends this one, else
    built from the reply and the calls the turn gave mol's ids."""
    request = records[index]["request"]
    prompt = request["messages"]
    for record in records[index + 1:]:
        later = record.get("request") if record.get("kind") == "engine" else None
        if later and later.get("adapter") == request["adapter"] and len(
                later["messages"]) > len(prompt) and later["messages"][:len(prompt)] == prompt:
            return later["messages"][len(prompt)]
    reply = records[index]["reply"]
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content") or None}
    calls = []
    for record in records[index + 1:]:
        if record.get("kind") == "engine":
            break
        event = record.get("event") if record.get("kind") == "event" else None
        if event and event.get("type") == "tool_call":
            calls.append({"id": event["call_id"], "type": "function",
                          "function": {"name": event["name"], "arguments": event["arguments"]}})
    if calls:
        message["tool_calls"] = calls
    elif message["content"] is None:
        message["content"] = ""
    return message

