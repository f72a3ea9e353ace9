"""A run folder as the exports read it, and the places they write to.

``read_run`` gives the run's meta, its HCP snapshot and each stored episode with its
trajectory (episodes run with ``--no-record`` have none and are counted, not exported).
``out_folder`` and ``out_file`` check an output path before anything is written, so a bad
``--out`` fails with its path and the reason, never halfway through an export.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mol.core.errors import EvalError
from mol.eval.store import Episode, Store
from mol.eval.trajectories.format import Trajectory, read


@dataclass
class RunSource:
    """One run folder: what it is a run of, and its episodes with their trajectories."""

    folder: Path
    meta: dict[str, Any]
    episodes: list[tuple[Episode, Trajectory]]
    unrecorded: list[Episode] = field(default_factory=list)
    """Episodes without a trajectory (``mol eval run --no-record``)."""

    def artifact(self) -> Any:
        """The HCP the run ran under (its snapshot in the run folder)."""
        from mol.eval.runner import SNAPSHOT
        from mol.hcp.snapshot import load_snapshot

        return load_snapshot(self.folder / SNAPSHOT)


def read_run(folder: Path) -> RunSource:
    """The run in ``folder``; ``EvalError`` naming the folder when it is not one."""
    folder = Path(folder)
    if not folder.is_dir():
        raise EvalError(f"{folder}: no such run folder (see 'mol eval run --out')")
    with Store(folder, create=False) as store:
        meta, rows = store.meta(), store.episodes()
    recorded, unrecorded = [], []
    for episode in rows:
        if episode.trajectory:
            recorded.append((episode, read(folder / episode.trajectory)))
        else:
            unrecorded.append(episode)
    return RunSource(folder, meta, recorded, unrecorded)


def out_folder(path: Path) -> Path:
    """``path`` as a folder to write into (made when missing); ``EvalError`` when it is a
    file or cannot be written."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise EvalError(f"--out {path}: is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EvalError(f"--out {path}: cannot make the folder: {exc.strerror or exc}") from exc
    if not os.access(path, os.W_OK | os.X_OK):
        raise EvalError(f"--out {path}: the folder is not writable")
    return path


def out_file(path: Path) -> Path:
    """``path`` as a file to (over)write; ``EvalError`` when it is a folder or its folder is
    missing or not writable."""
    path = Path(path)
    if path.is_dir():
        raise EvalError(f"--out {path}: is a folder, not a file")
    parent = path.parent
    if not parent.is_dir():
        raise EvalError(f"--out {path}: no folder {parent}")
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists()
                                                    and not os.access(path, os.W_OK)):
        raise EvalError(f"--out {path}: not writable")
    return path


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary name, so a failed export leaves no
    half-written file; ``EvalError`` naming the path when the disk refuses."""
    partial = path.with_name(path.name + ".partial")
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise EvalError(f"{path}: cannot write: {exc.strerror or exc}") from exc
