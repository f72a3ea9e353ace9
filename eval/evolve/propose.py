"""Turn proposals into candidates: validate each, write the valid ones into the lab.

A proposal is dropped, with the reason, when its patch does not apply to the parent's evolve
document, changes nothing, touches a path outside ``[evolve] paths`` (or one that is never
evolvable), adds a hook command the parent does not have (only for proposals from a model:
a hook runs on the host, so an adapter may rearrange the HCP's hook commands but not write
new ones), does not make a valid HCP, or repeats another proposal of the same batch.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mol.core.errors import HCPError
from mol.eval.evolve.document import document, touched
from mol.eval.evolve.lab import Candidate, Lab, candidate_id
from mol.eval.evolve.materialize import materialize
from mol.eval.evolve.proposers import Proposal
from mol.hcp.evolvable import evolvable


@dataclass
class Proposed:
    """What a proposal batch gave: the candidates and the dropped proposals."""

    batch: str
    candidates: list[Candidate] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)
    reply: str | None = None
    """What an adapter proposer answered, as it answered it."""

    def to_dict(self) -> dict[str, Any]:
        """As ``mol evolve propose --json`` prints it."""
        return {"batch": self.batch, "candidates": [c.summary() for c in self.candidates],
                "dropped": self.dropped, "reply": self.reply}


class _Dropped(Exception):
    """A proposal that does not become a candidate, and why."""


def hook_commands(doc: dict[str, Any]) -> set[str]:
    """Every hook command line of an evolve document."""
    return {hook.get("command", "") for matchers in (doc.get("hooks") or {}).values()
            for matcher in matchers for hook in matcher.get("hooks", [])}


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + " [...]"


def check(doc: dict[str, Any], proposal: Proposal, patterns: list[str],
          trusted: bool) -> tuple[dict[str, Any], list[str]]:
    """The patched document and the pointers it touches; ``_Dropped`` saying why not."""
    from mol.hcp.changes import patch_document

    try:
        new = patch_document(doc, proposal.patch)
    except HCPError as exc:
        raise _Dropped("; ".join(_short(issue.message) for issue in exc.issues)) from None
    if not isinstance(new, dict):
        raise _Dropped("the patch replaces the whole document with something else")
    paths = touched(doc, new)
    if not paths:
        raise _Dropped("the patch changes nothing")
    refused = [reason for path in paths if (reason := evolvable(path, patterns))]
    if refused:
        raise _Dropped("refused: " + "; ".join(refused[:3]) + (" ..." if len(refused) > 3
                                                                else ""))
    if not trusted:
        added = sorted(hook_commands(new) - hook_commands(doc))
        if added:
            raise _Dropped(f"adds the hook command {added[0]!r}: a model may reuse the HCP's "
                           "hook commands, not write new ones (hooks run on the host)")
    return new, paths


def propose(lab: Lab, parent: Any, parent_hcp: Path, run: Path,
            proposals: list[Proposal], *, trusted: bool) -> Proposed:
    """Validate ``proposals`` against ``parent`` (whose results are ``run``) and record the
    valid ones as candidates of one batch."""
    doc = document(parent)
    patterns = list(parent.doc.evolve.paths)
    batch = hashlib.sha256(f"{time.time_ns()}{parent.digest}".encode()).hexdigest()[:12]
    result = Proposed(batch)
    for index, proposal in enumerate(proposals):
        try:
            new, paths = check(doc, proposal, patterns, trusted)
            candidate = _record(lab, parent, parent_hcp, run, proposal, new, paths, batch)
        except _Dropped as exc:
            result.dropped.append({"index": index, "proposer": proposal.proposer,
                                   "note": proposal.note, "reason": str(exc)})
            continue
        if any(c.id == candidate.id for c in result.candidates):
            result.dropped.append({"index": index, "proposer": proposal.proposer,
                                   "note": proposal.note,
                                   "reason": f"the same edit as candidate {candidate.id}"})
            continue
        result.candidates.append(candidate)
    return result


def _record(lab: Lab, parent: Any, parent_hcp: Path, run: Path, proposal: Proposal,
            new: dict[str, Any], paths: list[str], batch: str) -> Candidate:
    """Write the candidate's HCP into the lab and record it (or find it recorded)."""
    staging = lab.path(f"new-{batch}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        artifact = materialize(parent, new, staging / "hcp")
    except HCPError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise _Dropped("not a valid HCP: " + "; ".join(
            f"{i.path + ': ' if i.path else ''}{i.message}" for i in exc.issues[:3])) from None
    ident = candidate_id(parent.digest, artifact.behaviour_digest)
    final = lab.path(ident)
    if (final / "hcp").is_dir():
        shutil.rmtree(staging)
    else:
        final.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(final)  # the same depth: its relative file references still hold
    candidate = lab.add({
        "id": ident, "batch": batch, "parent": parent.digest,
        "parent_behaviour": parent.behaviour_digest, "parent_hcp": str(Path(parent_hcp)),
        "run": str(Path(run).resolve()), "proposer": proposal.proposer, "note": proposal.note,
        "patch": proposal.patch, "touched": paths, "digest": artifact.digest,
        "behaviour_digest": artifact.behaviour_digest})
    batches = candidate.record.setdefault("batches", [candidate.record["batch"]])
    if batch not in batches:
        batches.append(batch)
        from mol.eval.evolve.lab import write_json

        write_json(candidate.folder / "candidate.json", candidate.record)
    return candidate


async def from_adapter(lab: Lab, parent: Any, parent_hcp: Path, run: Path, adapter: str,
                       n: int, engine_url: str | None = None) -> Proposed:
    """Ask ``adapter`` (through the engine the parent names) for up to ``n`` candidates and
    validate what it answers."""
    import anyio

    from mol.core.errors import UsageError
    from mol.eval.evolve.document import evolvable_parts
    from mol.eval.evolve.proposers import ask_adapter, failed_episodes
    from mol.runtime import LiteLLMEngine

    if adapter not in parent.doc.adapters:
        raise UsageError(f"--proposer adapter:{adapter}: the HCP declares "
                         f"{', '.join(parent.doc.adapter_names)}")
    engine = LiteLLMEngine.from_artifact(parent, engine_url)
    await anyio.to_thread.run_sync(engine.load)
    patterns = list(parent.doc.evolve.paths)
    config = parent.doc.adapter(adapter).params
    params = {"max_tokens": config.max_tokens or 4096, "temperature": config.temperature}
    proposals, problem, reply = await ask_adapter(
        adapter, engine, evolvable_parts(document(parent), patterns), failed_episodes(run),
        patterns, n, params)
    result = propose(lab, parent, parent_hcp, run, proposals[:n], trusted=False)
    result.dropped += [{"index": index, "proposer": p.proposer, "note": p.note,
                        "reason": f"beyond the {n} candidates asked for (-n)"}
                       for index, p in enumerate(proposals) if index >= n]
    if problem:
        result.dropped.append({"index": None, "proposer": f"adapter:{adapter}", "note": "",
                               "reason": problem})
    result.reply = reply
    return result
