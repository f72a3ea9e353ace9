"""Task folders in the Harbor / Terminal-Bench 2 layout, and suites of them.

::

    TASK/ instruction.md  task.toml  environment/Dockerfile  tests/test.sh  solution/solve.sh

``instruction.md`` is the user turn; ``tests/test.sh`` is the verifier; ``environment/``
(optional) is the build context of the task's image; ``solution/solve.sh`` (optional) is
what ``--agent oracle`` runs. ``task.toml`` may give ``[metadata]`` (free-form; ``tags`` is
read), ``[agent] timeout_sec``, ``[verifier] timeout_sec`` and ``pass_threshold`` (a mol
extension), ``[environment] build_timeout_sec cpus memory_mb storage_mb allow_internet``.
Other keys are kept and ignored, each with a note. A suite is a folder of task folders
(or one task folder).
"""

from __future__ import annotations

import fnmatch
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mol.core.errors import TaskError
from mol.hcp.digest import digest_tree

AGENT_TIMEOUT = 600.0
"""Seconds the agent gets when ``[agent] timeout_sec`` is unset."""
VERIFIER_TIMEOUT = 600.0
"""Seconds the verifier gets when ``[verifier] timeout_sec`` is unset."""
BUILD_TIMEOUT = 600.0
"""Seconds an image build may take when ``[environment] build_timeout_sec`` is unset."""

_KNOWN: dict[str, dict[str, tuple[type, ...]]] = {
    "agent": {"timeout_sec": (int, float)},
    "verifier": {"timeout_sec": (int, float), "pass_threshold": (int, float)},
    "environment": {"build_timeout_sec": (int, float), "cpus": (int, float),
                    "memory_mb": (int,), "storage_mb": (int,), "allow_internet": (bool,)},
}
_SILENT = ("version", "schema_version", "metadata", "task")
"""Top-level keys read elsewhere or of no consequence here (no note)."""


@dataclass(frozen=True)
class TaskConfig:
    """What ``task.toml`` says, with mol's defaults filled in."""

    agent_timeout: float = AGENT_TIMEOUT
    verifier_timeout: float = VERIFIER_TIMEOUT
    build_timeout: float = BUILD_TIMEOUT
    pass_threshold: float = 1.0
    """Reward at or above which the episode passes."""
    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    allow_internet: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    """One sentence per key that is kept but ignored."""

    @property
    def tags(self) -> list[str]:
        """``[metadata] tags`` (e.g. ``guard``), when it is a list of strings."""
        tags = self.metadata.get("tags")
        return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []


@dataclass(frozen=True)
class Task:
    """One task folder, read and checked."""

    name: str
    """The folder's path relative to the suite (its name for a single-task suite)."""
    path: Path
    digest: str
    """``sha256:`` over every file of the folder (``mol.hcp.digest.digest_tree``)."""
    instruction: str
    config: TaskConfig

    @property
    def environment(self) -> Path | None:
        """The image's build context, when the task has an ``environment/Dockerfile``."""
        folder = self.path / "environment"
        return folder if (folder / "Dockerfile").is_file() else None

    @property
    def solution(self) -> Path | None:
        """``solution/solve.sh``, when the task has one."""
        script = self.path / "solution" / "solve.sh"
        return script if script.is_file() else None


def parse_config(text: str, where: str) -> TaskConfig:
    """``task.toml`` text as a ``TaskConfig``; ``TaskError`` naming the key at fault."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{where}: invalid TOML: {exc}") from None
    values: dict[str, Any] = {}
    notes: list[str] = []
    for section, table in raw.items():
        if section in _SILENT:
            continue
        known = _KNOWN.get(section)
        if known is None or not isinstance(table, dict):
            notes.append(f"{where}: [{section}] is kept but ignored")
            continue
        for key, value in table.items():
            types = known.get(key)
            if types is None:
                notes.append(f"{where}: [{section}] {key} is kept but ignored")
                continue
            if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
                kind = "true or false" if types == (bool,) else "a number"
                raise TaskError(f"{where}: [{section}] {key} must be {kind}, got {value!r}")
            if types != (bool,) and not math.isfinite(value):  # TOML has nan and inf
                raise TaskError(f"{where}: [{section}] {key} must be a finite number, "
                                f"got {value!r}")
            if types != (bool,) and value <= 0 and key != "pass_threshold":
                raise TaskError(f"{where}: [{section}] {key} must be above 0, got {value!r}")
            values[f"{section}.{key}"] = value
    metadata = raw.get("metadata", {})
    if not isinstance(metadata, dict):
        raise TaskError(f"{where}: [metadata] must be a table")
    return TaskConfig(
        agent_timeout=float(values.get("agent.timeout_sec", AGENT_TIMEOUT)),
        verifier_timeout=float(values.get("verifier.timeout_sec", VERIFIER_TIMEOUT)),
        build_timeout=float(values.get("environment.build_timeout_sec", BUILD_TIMEOUT)),
        pass_threshold=float(values.get("verifier.pass_threshold", 1.0)),
        cpus=values.get("environment.cpus"), memory_mb=values.get("environment.memory_mb"),
        storage_mb=values.get("environment.storage_mb"),
        allow_internet=bool(values.get("environment.allow_internet", False)),
        metadata=metadata, notes=tuple(notes))


def load_task(folder: Path, name: str | None = None) -> Task:
    """The task in ``folder``; ``TaskError`` naming the file that is missing or wrong."""
    folder = Path(folder)
    label = name or folder.name
    for required in ("task.toml", "instruction.md", "tests/test.sh"):
        if not (folder / required).is_file():
            raise TaskError(f"task {label}: {folder / required} is missing (a task folder "
                            "holds instruction.md, task.toml and tests/test.sh)")
    try:
        config = parse_config((folder / "task.toml").read_text(encoding="utf-8"),
                              f"task {label}: task.toml")
        instruction = (folder / "instruction.md").read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(f"task {label}: a file is not UTF-8 text ({exc.reason})") from None
    if not instruction.strip():
        raise TaskError(f"task {label}: instruction.md is empty")
    return Task(label, folder.resolve(), digest_tree(folder), instruction, config)


def load_suite(folder: Path, pattern: str | None = None) -> list[Task]:
    """The tasks of a suite folder (sorted by name), those whose name matches ``pattern``
    (a glob) when one is given. A folder that is itself a task is a suite of one."""
    folder = Path(folder)
    if not folder.is_dir():
        raise TaskError(f"suite {folder}: no such folder")
    if (folder / "task.toml").is_file():
        tasks = [load_task(folder)]
    else:
        tasks = [load_task(child, child.name) for child in sorted(folder.iterdir())
                 if child.is_dir() and (child / "task.toml").is_file()]
    if not tasks:
        raise TaskError(f"suite {folder}: no task folders (folders holding a task.toml)")
    if pattern:
        tasks = [task for task in tasks if fnmatch.fnmatchcase(task.name, pattern)]
        if not tasks:
            raise TaskError(f"suite {folder}: no task matches --tasks {pattern!r}")
    return tasks
