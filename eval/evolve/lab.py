"""The lab: the folder where ``mol evolve`` keeps candidates, their runs, their evaluations
and their promotions, and from which ``mol evolve log`` draws the lineage.

```
LAB/candidates/ID/candidate.json    the patch, its parent (digest, HCP file, run), the
                                    proposer and its note, the touched paths, the digests
LAB/candidates/ID/hcp/hcp.toml      the candidate HCP, with the files it changed
LAB/candidates/ID/runs/NAME/        its eval runs (one per parent run it was evaluated on)
LAB/candidates/ID/evaluations.json  the gate's verdicts, with the slice and the evidence
LAB/candidates/ID/promoted.json     where it was promoted to
```

A candidate's id is 12 hex digits of a digest of its parent's digest and its own behaviour
digest: proposing the same edit to the same parent twice gives the same candidate. Every
file is written whole to a temporary name and renamed into place.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mol.core.errors import EvalError, UsageError

CANDIDATES = "candidates"


def default_lab() -> Path:
    """``$XDG_STATE_HOME/mol/evolve`` (``~/.local/state``): where ``--lab`` points by default."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "mol" / "evolve"


def candidate_id(parent_digest: str, behaviour_digest: str) -> str:
    """The id of the candidate with this behaviour derived from this parent."""
    return hashlib.sha256(f"{parent_digest}\n{behaviour_digest}".encode()).hexdigest()[:12]


def resolved(path: Path | str) -> Path:
    """``path`` made absolute, symbolic links resolved (how the lab names run folders)."""
    return Path(path).resolve()


def write_json(path: Path, data: Any) -> None:
    """``data`` as indented JSON at ``path``, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n",
                       encoding="utf-8")
    os.replace(partial, path)


def read_json(path: Path, default: Any = None) -> Any:
    """The JSON at ``path`` (``default`` when there is none)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return default
    except (OSError, json.JSONDecodeError) as exc:
        raise EvalError(f"{path}: cannot read the lab's record: {exc}") from exc


@dataclass
class Candidate:
    """One candidate of the lab."""

    folder: Path
    record: dict[str, Any]
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    promoted: dict[str, Any] | None = None

    @property
    def id(self) -> str:
        """The candidate's id."""
        return self.record["id"]

    @property
    def hcp(self) -> Path:
        """The candidate's HCP file."""
        return self.folder / "hcp" / "hcp.toml"

    def run_folder(self, parent_run: Path) -> Path:
        """Where the candidate's run against ``parent_run`` goes."""
        parent_run = Path(parent_run).resolve()
        tag = hashlib.sha256(str(parent_run).encode()).hexdigest()[:8]
        return self.folder / "runs" / f"{parent_run.name}-{tag}"

    def evaluation(self, run: Path | str | None = None) -> dict[str, Any] | None:
        """The latest evaluation (against ``run``, when given)."""
        found = [e for e in self.evaluations
                 if run is None or e["run"] == str(Path(run).resolve())]
        return found[-1] if found else None

    def summary(self) -> dict[str, Any]:
        """The candidate as ``mol evolve log --json`` shows it."""
        keys = ("id", "digest", "parent", "batch", "proposer", "note", "patch", "touched",
                "run", "created")
        return {**{k: self.record.get(k) for k in keys}, "hcp": str(self.hcp),
                "evaluations": self.evaluations, "promoted": self.promoted}


class Lab:
    """The candidates in a lab folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def path(self, candidate: str) -> Path:
        """The folder of candidate ``candidate`` (an id)."""
        return self.folder / CANDIDATES / candidate

    def add(self, record: dict[str, Any]) -> Candidate:
        """Record a new candidate (its ``hcp/`` must be written already), or return the one
        with the same id."""
        folder = self.path(record["id"])
        existing = read_json(folder / "candidate.json")
        if existing is None:
            write_json(folder / "candidate.json", {**record, "created": time.time()})
        return self.get(record["id"])

    def get(self, candidate: str) -> Candidate:
        """The candidate whose id is ``candidate`` or starts with it."""
        base = self.folder / CANDIDATES
        matches = sorted(p for p in base.glob(f"{candidate}*") if p.is_dir()) \
            if re.fullmatch(r"[0-9a-f]{1,12}", candidate) and base.is_dir() else []
        complete = [p for p in matches if (p / "candidate.json").is_file()]
        if len(complete) != 1:
            known = ", ".join(c.id for c in self.candidates()) or "none"
            what = "matches several candidates" if complete else "is no candidate"
            raise UsageError(f"{candidate!r} {what} of the lab {self.folder} (candidates: "
                             f"{known})")
        folder = complete[0]
        return Candidate(folder, read_json(folder / "candidate.json"),
                         read_json(folder / "evaluations.json", []),
                         read_json(folder / "promoted.json"))

    def candidates(self) -> list[Candidate]:
        """Every candidate, oldest first."""
        base = self.folder / CANDIDATES
        found = [self.get(p.name) for p in base.iterdir()
                 if (p / "candidate.json").is_file()] if base.is_dir() else []
        return sorted(found, key=lambda c: (c.record.get("created", 0), c.id))

    def add_evaluation(self, candidate: Candidate, evaluation: dict[str, Any]) -> None:
        """Append an evaluation to the candidate's record."""
        candidate.evaluations.append(evaluation)
        write_json(candidate.folder / "evaluations.json", candidate.evaluations)

    def set_promoted(self, candidate: Candidate, promoted: dict[str, Any]) -> None:
        """Record where the candidate was promoted to."""
        candidate.promoted = promoted
        write_json(candidate.folder / "promoted.json", promoted)

    def siblings(self, candidate: Candidate) -> list[Candidate]:
        """The other candidates proposed in a batch with ``candidate``."""
        mine = set(_batches(candidate))
        return [c for c in self.candidates() if c.id != candidate.id and mine & set(
            _batches(c))]


def _batches(candidate: Candidate) -> list[str]:
    return candidate.record.get("batches") or [candidate.record.get("batch", "")]
