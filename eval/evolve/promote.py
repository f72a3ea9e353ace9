"""Promote a candidate (write its HCP where it will be used) and draw the lab's lineage.

A promotion writes the candidate again from its parent and its patch into ``--to DIR``
(default ``LAB/promoted/DIGEST``): ``DIR/hcp.toml`` with ``parent`` = the parent's digest,
and beside it only the files the patch changed; unchanged files are referenced where the
parent has them. It must come out with the candidate's digest, and it needs the gate's
``promote`` (and, for the best of several candidates proposed together, a confirmation on
tasks not used to select it).
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from mol.core.errors import EvalError
from mol.eval.evolve.lab import Candidate, Lab


def promote(lab: Lab, candidate: Candidate, to: Path | None = None) -> dict[str, Any]:
    """Write the promoted HCP; returns the promotion record."""
    from mol.eval.evolve.document import document
    from mol.eval.evolve.evaluate import selection_problem
    from mol.eval.evolve.materialize import materialize
    from mol.hcp.changes import patch_document
    from mol.hcp.loader import load
    from mol.hcp.snapshot import TOML

    problem = selection_problem(lab, candidate)
    if problem is not None:
        raise EvalError(f"not promoted: {problem}")
    record = candidate.record
    to = Path(to) if to is not None else lab.folder / "promoted" / record["digest"][7:19]
    if (to / TOML).is_file() and load(to / TOML).digest == record["digest"]:
        promoted = {"to": str(to), "hcp": str(to / TOML), "digest": record["digest"],
                    "parent": record["parent"], "created": time.time()}
    else:
        parent = load(record["parent_hcp"])
        if parent.digest != record["parent"]:
            raise EvalError(f"not promoted: the parent HCP {record['parent_hcp']} changed since "
                            f"the proposal (digest {parent.digest}, not {record['parent']})")
        artifact = materialize(parent, patch_document(document(parent), record["patch"]), to)
        if artifact.digest != record["digest"]:
            raise EvalError(f"the promoted HCP came out as {artifact.digest}, not the "
                            f"candidate's {record['digest']}")
        promoted = {"to": str(to), "hcp": str(to / TOML), "digest": artifact.digest,
                    "parent": artifact.doc.parent, "created": time.time()}
    lab.set_promoted(candidate, promoted)
    return promoted


def lineage(lab: Lab) -> dict[str, Any]:
    """The lab's lineage tree: each root HCP (a parent that is no candidate), its candidates,
    and theirs, with each step's patch, slice, outcome and evidence."""
    candidates = lab.candidates()
    children: dict[str, list[Candidate]] = defaultdict(list)
    for candidate in candidates:
        children[candidate.record["parent"]].append(candidate)
    digests = {c.record["digest"] for c in candidates}
    roots: dict[str, str] = {}
    for candidate in candidates:
        if candidate.record["parent"] not in digests:
            roots.setdefault(candidate.record["parent"], candidate.record["parent_hcp"])

    def node(candidate: Candidate) -> dict[str, Any]:
        return {**candidate.summary(),
                "children": [node(c) for c in children[candidate.record["digest"]]]}

    return {"lab": str(lab.folder), "roots": [
        {"digest": digest, "hcp": hcp, "children": [node(c) for c in children[digest]]}
        for digest, hcp in roots.items()]}


def lineage_text(tree: dict[str, Any]) -> str:
    """The lineage for people: one line per HCP and candidate, indented by generation."""
    lines = []
    for root in tree["roots"]:
        lines.append(f"{root['digest'][:19]}  {root['hcp']}")
        lines += _lines(root["children"], 1)
    return "\n".join(lines) or f"no candidates in {tree['lab']}"


def _lines(nodes: list[dict[str, Any]], depth: int) -> list[str]:
    out = []
    for node in nodes:
        pad = "  " * depth
        last = node["evaluations"][-1] if node["evaluations"] else None
        verdict = f"{last['outcome']}: {last['reason']}" if last else "not evaluated"
        promoted = f" -> promoted {node['digest'][:19]} ({node['promoted']['to']})" \
            if node["promoted"] else ""
        out.append(f"{pad}- {node['id']} {', '.join(node['touched'][:3])}: {verdict}"
                   f"{promoted}")
        if last:
            counts = last["slice"]
            out.append(f"{pad}  slice: {counts['affected']} affected, "
                       f"{counts['unaffected_by_replay']} cleared by replay, "
                       f"{counts['unaffected_by_reads']} by reads; episodes run "
                       f"{sum(last['episodes_run'].values())} of {last['episodes_full']}")
        out += _lines(node["children"], depth + 1)
    return out
