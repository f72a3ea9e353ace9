"""The results store of an eval run: one SQLite file in the run folder, one row per episode.

A run folder holds ``results.db``, the HCP it ran under (``hcp/``, a snapshot) and the
trajectories (``trajectories/TASK.EPOCH.jsonl``). A row is keyed by (task, epoch) and
carries what results are reused under (task digest, HCP digest, agent, adapter pin, mol
version), the outcome and its costs. ``put`` writes the trajectory file first (to a
temporary name, then renamed) and the row after it, in one transaction with
``synchronous=FULL``: a killed run loses only the episodes in flight, and writing the
same episode twice leaves one row. ``meta`` says what the folder is a run of; a second
``mol eval run`` into it must be a run of the same thing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

import anyio

from mol.core.errors import EvalError

T = TypeVar("T")

DATABASE = "results.db"
TRAJECTORIES = "trajectories"

MIGRATIONS: list[str] = [
    # 1: what the run is, and its episodes.
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE episodes (
        task TEXT NOT NULL, epoch INTEGER NOT NULL, task_digest TEXT NOT NULL,
        hcp_digest TEXT NOT NULL, agent TEXT NOT NULL, adapter TEXT NOT NULL,
        outcome TEXT NOT NULL, reward REAL, reason TEXT NOT NULL, error TEXT NOT NULL,
        steps INTEGER NOT NULL, prompt_tokens INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL, cached_tokens INTEGER NOT NULL,
        wall_sec REAL NOT NULL, started REAL NOT NULL, finished REAL NOT NULL,
        trajectory TEXT, reads TEXT NOT NULL, placement TEXT NOT NULL,
        mol_version TEXT NOT NULL, PRIMARY KEY (task, epoch));
    """,
    # 2: what results are keyed by (the behaviour digest, the engine's model fingerprint),
    # and where an inherited result came from (mol evolve).
    """
    ALTER TABLE episodes ADD COLUMN behaviour_digest TEXT NOT NULL DEFAULT '';
    ALTER TABLE episodes ADD COLUMN model TEXT NOT NULL DEFAULT '';
    ALTER TABLE episodes ADD COLUMN inherited TEXT NOT NULL DEFAULT '';
    ALTER TABLE episodes ADD COLUMN agent_sec REAL NOT NULL DEFAULT 0;
    """,
]
"""Ordered schema migrations; never edit one that shipped, append a new one."""

OUTCOMES = ("pass", "fail", "error")


@dataclass
class Episode:
    """One episode's row (and, before it is stored, its trajectory's lines)."""

    task: str
    epoch: int
    task_digest: str
    hcp_digest: str
    agent: str
    adapter: str = ""
    """The pinned adapter (``--adapter``); empty when the turn was routed."""
    outcome: str = "error"
    """``pass``, ``fail`` or ``error``."""
    reward: float | None = None
    reason: str = ""
    """Why it failed or errored, in a word: ``reward``, ``agent_timeout``, ``max_steps``,
    ``token_budget``, ``verifier``, ``sandbox``, ``engine``, ``build``, ``task``,
    ``node_lost`` (``--ray``), ``internal``."""
    error: str = ""
    """The message, for errors (and what the budget was, for budget fails)."""
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    wall_sec: float = 0.0
    started: float = 0.0
    finished: float = 0.0
    trajectory: str | None = None
    """The trajectory file, relative to the run folder."""
    reads: list[str] = field(default_factory=list)
    """JSON Pointers of the HCP parts the episode read (``mol.eval.trajectories.reads``)."""
    placement: str = "local"
    """Where it ran: ``local``, or ``ray:HOST/NODEID8`` (``mol.eval.cluster.ray_backend``)."""
    mol_version: str = ""
    behaviour_digest: str = ""
    """The behaviour digest of the HCP it ran under (``Artifact.behaviour_digest``)."""
    model: str = ""
    """The fingerprint of the model the engine served (``mol.eval.keys``); empty for oracle
    episodes."""
    agent_sec: float = 0.0
    """Time of the agent's part (the turn, or the oracle's solution): what an HCP edit can
    make slower, unlike the sandbox's start and the verifier."""
    inherited: str = ""
    """For a result ``mol evolve`` inherited from the parent's run instead of running it: the
    parent's HCP digest (``hcp_digest`` and ``behaviour_digest`` say what ran)."""
    lines: list[str] | None = field(default=None, repr=False, compare=False)
    """The trajectory's JSON lines, until ``put`` writes them (never stored in the row)."""

    def row(self) -> dict[str, Any]:
        """The stored columns."""
        data = asdict(self)
        data.pop("lines")
        data["reads"] = json.dumps(self.reads)
        return data


_COLUMNS = [f.name for f in fields(Episode) if f.name != "lines"]


def trajectory_name(task: str, epoch: int) -> str:
    """Where an episode's trajectory goes, relative to the run folder."""
    return f"{TRAJECTORIES}/{task.replace('/', '__')}.{epoch}.jsonl"


class Store:
    """The results of one run folder. Calls run in a worker thread, one at a time."""

    def __init__(self, folder: Path, *, create: bool = True) -> None:
        self.folder = Path(folder)
        path = self.folder / DATABASE
        if not create and not path.is_file():
            raise EvalError(f"{self.folder}: not an eval run (no {DATABASE}; see 'mol eval "
                            "run --out')")
        self._lock = threading.Lock()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                                       timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._migrate()
        except (sqlite3.Error, OSError) as exc:
            raise EvalError(f"{path}: cannot open the results store: {exc}") from exc

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise EvalError(f"{self.folder}: results schema {version} is newer than this mol "
                            f"knows ({len(MIGRATIONS)}); upgrade mol")
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            self._db.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")

    def _locked(self, fn: Callable[..., T], *args: Any) -> T:
        with self._lock:
            try:
                return fn(*args)
            except sqlite3.Error as exc:
                raise EvalError(f"{self.folder / DATABASE}: {exc}") from exc

    # -- meta -----------------------------------------------------------------------------

    def meta(self) -> dict[str, Any]:
        """What the folder is a run of (suite, HCP digest, agent, adapter, ...)."""
        rows = self._locked(lambda: self._db.execute("SELECT key, value FROM meta").fetchall())
        return {key: json.loads(value) for key, value in rows}

    def claim(self, identity: dict[str, Any], extra: dict[str, Any] | None = None) -> None:
        """Make the folder a run of ``identity``, or check it already is one."""
        found = self.meta()
        clash = {k: (found[k], v) for k, v in identity.items() if k in found and found[k] != v}
        if clash:
            what = "; ".join(f"{k} is {old!r}, not {new!r}" for k, (old, new) in clash.items())
            raise EvalError(f"{self.folder} holds another run ({what}): give another --out")
        values = {**identity, **(extra or {})}
        self._locked(self._put_meta, {k: v for k, v in values.items() if k not in found})

    def _put_meta(self, values: dict[str, Any]) -> None:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                                 [(k, json.dumps(v)) for k, v in values.items()])
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- episodes -------------------------------------------------------------------------

    def episodes(self) -> list[Episode]:
        """Every stored episode, by task then epoch."""
        rows = self._locked(lambda: self._db.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM episodes ORDER BY task, epoch").fetchall())
        out = []
        for row in rows:
            data = dict(zip(_COLUMNS, row, strict=True))
            data["reads"] = json.loads(data["reads"])
            out.append(Episode(**data))
        return out

    def put(self, episode: Episode) -> None:
        """Store an episode: its trajectory file, then its row (replacing an older one)."""
        if episode.lines is not None:
            episode.trajectory = trajectory_name(episode.task, episode.epoch)
            _write_atomically(self.folder / episode.trajectory, episode.lines)
        row = episode.row()
        names = ", ".join(row)
        updates = ", ".join(f"{k} = excluded.{k}" for k in row if k not in ("task", "epoch"))
        # One statement: SQLite commits it whole or not at all.
        self._locked(self._db.execute, f"INSERT INTO episodes ({names}) VALUES "
                     f"({', '.join('?' * len(row))}) ON CONFLICT (task, epoch) DO UPDATE SET "
                     f"{updates}", tuple(row.values()))

    async def aput(self, episode: Episode) -> None:
        """``put`` in a worker thread (a full-sync commit may wait on the disk)."""
        await anyio.to_thread.run_sync(self.put, episode)

    def integrity(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` answer (``ok`` when the file is sound)."""
        return self._locked(lambda: self._db.execute("PRAGMA integrity_check").fetchone()[0])


def _write_atomically(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="utf-8") as out:
        out.write("".join(line + "\n" for line in lines))
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)
