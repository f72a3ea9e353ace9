"""What a Ray episode sends over the network, and how a node turns it back into folders.

The driver sends each node, once per run (as Ray objects, fetched once per node):

- the HCP as its snapshot (``mol.hcp.snapshot.entries``: the TOML and every file it names);
- each task folder as its files (bytes and permission bits) and symbolic links;

and per episode a small ``Spec`` (task, epoch, digests, agent, adapter pin, engine URL,
recording, the driver's mol version). Nothing else of the driver crosses: no environment
variables (an engine key is read from the node's own environment), no other files, no
code (every node has the same mol installed). A result comes back as ``pack``: the row's
columns, the trajectory's lines and the node's notes.

On the node, ``materialize`` writes a folder under the node's cache (content addressed by
its digest, written aside and renamed into place, so concurrent workers of one node
share it and a half-written folder is never used) and the loader checks the digest
again: what runs is byte for byte what the driver has.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from mol.core import __version__
from mol.core.errors import TaskError
from mol.eval.store import Episode
from mol.eval.tasks import Task
from mol.hcp.snapshot import Entry, write_entries

Link = tuple[str, str]
"""A symbolic link of a task folder: (relative path, target)."""


@dataclass(frozen=True)
class Spec:
    """One episode, as the driver asks a node to run it."""

    task: str
    task_digest: str
    epoch: int
    hcp_digest: str
    agent: str
    adapter: str | None
    engine_url: str | None
    """The engine every node talks to (resolved on the driver), None for the oracle."""
    record: bool
    mol_version: str
    """The driver's mol: a node running another refuses the episode."""
    behaviour_digest: str = ""
    """The HCP's behaviour digest (``Artifact.behaviour_digest``): results are keyed by it."""
    model: str = ""
    """The engine's model fingerprint (``mol.eval.keys``), found once by the driver."""


def cache_dir() -> Path:
    """Where a node keeps what drivers sent it: ``$XDG_CACHE_HOME/mol/eval`` (``~/.cache``).
    It is content addressed; deleting it at any time only costs a re-send."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "mol" / "eval"


def task_tree(task: Task) -> tuple[list[Entry], list[Link]]:
    """A task folder's files and links, as ``digest_tree`` sees them."""
    files: list[Entry] = []
    links: list[Link] = []
    for path in sorted(task.path.rglob("*")):
        if "__pycache__" in path.parts:
            continue
        relative = path.relative_to(task.path).as_posix()
        if path.is_symlink():
            links.append((relative, os.readlink(path)))
        elif path.is_file():
            files.append((relative, path.read_bytes(), path.stat().st_mode & 0o777))
    return files, links


def materialize(kind: str, digest: str, files: list[Entry],
                links: list[Link] | None = None) -> Path:
    """The folder ``cache_dir()/KIND/DIGEST`` holding ``files`` and ``links``, written once."""
    root = cache_dir() / kind
    target = root / digest.removeprefix("sha256:")[:40]
    if target.is_dir():
        return target
    for relative in [name for name, _, _ in files] + [name for name, _ in links or []]:
        _check_relative(relative)
    root.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=root))
    try:
        write_entries(files, partial)
        for relative, destination in links or []:
            (partial / relative).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(destination, partial / relative)
        os.rename(partial, target)
    except OSError:
        # Another worker of this node renamed the same content into place first.
        shutil.rmtree(partial, ignore_errors=True)
        if not target.is_dir():
            raise
    return target


def forget(folder: Path) -> None:
    """Drop a cached folder that turned out not to match its digest."""
    shutil.rmtree(folder, ignore_errors=True)


def _check_relative(name: str) -> None:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise TaskError(f"a sent file is named {name!r}: only paths inside the folder travel")


def pack(episode: Episode, notes: list[str]) -> dict[str, Any]:
    """A finished episode as it travels back to the driver."""
    row = asdict(episode)
    return {"row": {k: v for k, v in row.items() if k != "lines"}, "lines": episode.lines,
            "notes": notes}


def unpack(result: dict[str, Any]) -> tuple[Episode, list[str]]:
    """The episode (with its trajectory's lines) and the node's notes."""
    return Episode(**result["row"], lines=result["lines"]), list(result["notes"])


def failed(spec: Spec, reason: str, error: str, started: float) -> Episode:
    """The row of an episode that could not run (or whose node was lost)."""
    return Episode(spec.task, spec.epoch, spec.task_digest, spec.hcp_digest, spec.agent,
                   spec.adapter or "", reason=reason, error=error, started=started,
                   finished=time.time(), wall_sec=round(time.time() - started, 6),
                   mol_version=__version__, behaviour_digest=spec.behaviour_digest,
                   model=spec.model)
