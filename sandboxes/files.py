"""Paths confined to the workspace, and the tar archives files travel in.

Files go in and out as tar archives over the Docker API or, when small, through
the sandbox's shell as base64 (``shell_upload``, ``shell_write``, ``shell_read``): the
archive API starts a process in the Docker engine for each call (~50 ms of CPU), the
shell takes a few milliseconds. A path is accepted when it names something inside the
workspace: relative paths are taken from the workspace, absolute ones must lie
in it, and ``..`` is refused outright. Symlinks are checked component by
component with Docker's path stat (which reports a link's fully resolved
target): a link that leads outside the workspace is refused, in both
directions; one that stays inside is followed.
"""

from __future__ import annotations

import base64
import io
import shlex
import tarfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from mol.core.errors import PathEscape, SandboxError
from mol.sandboxes.docker import MODE_DIR, MODE_SYMLINK

MODE_TYPE = MODE_DIR | MODE_SYMLINK | (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21) | (1 << 19)
"""Go's ``os.ModeType``: every file-type bit (a regular file has none)."""

Stat = Callable[[str], Awaitable[dict[str, Any] | None]]


def confine(workspace: str, path: str) -> list[str]:
    """The components of ``path`` below ``workspace``; ``PathEscape`` when it is outside."""
    if "\0" in path:
        raise PathEscape(f"{path!r}: a path cannot contain a NUL byte")
    pure = PurePosixPath(path or ".")
    root = PurePosixPath(workspace)
    if pure.is_absolute():
        if pure != root and root not in pure.parents:
            raise PathEscape(f"{path}: outside the workspace {workspace}")
        pure = pure.relative_to(root)
    parts = [part for part in pure.parts if part != "."]
    if ".." in parts:
        raise PathEscape(f"{path}: '..' is not allowed in sandbox paths")
    return parts


def inside(workspace: str, target: str) -> bool:
    """Whether an absolute resolved path lies in the workspace."""
    pure, root = PurePosixPath(target), PurePosixPath(workspace)
    return pure == root or root in pure.parents


@dataclass(frozen=True)
class Located:
    """Where a path really is: its resolved existing part and what is left to create."""

    existing: str
    """Deepest existing component, symlinks resolved (the workspace at least)."""
    missing: list[str]
    """Components below ``existing`` that do not exist yet."""
    stat: dict[str, Any] | None
    """Docker's stat of ``existing`` (``None`` for the workspace itself)."""

    @property
    def is_dir(self) -> bool:
        """Whether ``existing`` is a directory."""
        return self.stat is None or bool(self.stat["mode"] & MODE_DIR)

    @property
    def is_file(self) -> bool:
        """Whether ``existing`` is a regular file."""
        return self.stat is not None and not self.stat["mode"] & MODE_TYPE


async def locate(workspace: str, path: str, stat: Stat) -> Located:
    """Resolve ``path`` one component at a time, refusing links that leave the workspace."""
    parts = confine(workspace, path)
    current, info = workspace, None
    for index, part in enumerate(parts):
        candidate = f"{current.rstrip('/')}/{part}"
        found = await stat(candidate)
        if found is None:
            return Located(current, parts[index:], info)
        if found["mode"] & MODE_SYMLINK:
            target = found.get("linkTarget") or ""
            if not inside(workspace, target):
                raise PathEscape(f"{path}: {candidate} is a symlink to {target or '?'}, "
                                 "outside the workspace")
            found = await stat(target)
            if found is None:
                raise SandboxError(f"{path}: {candidate} is a dangling symlink")
            candidate = target
        if index < len(parts) - 1 and not found["mode"] & MODE_DIR:
            raise SandboxError(f"{path}: {candidate} is not a directory")
        current, info = candidate, found
    return Located(current, [], info)


def pack(parts: list[str], data: bytes, *, uid: int, gid: int, mode: int = 0o644) -> bytes:
    """A tar archive creating the directories ``parts[:-1]`` and the file ``parts[-1]``."""
    return pack_tree([("/".join(parts), data, mode)], uid=uid, gid=gid)


def pack_tree(entries: list[tuple[str, bytes, int]], *, uid: int, gid: int) -> bytes:
    """A tar archive of files ``(relative path, bytes, mode)``, with every folder they need,
    all owned by ``uid:gid``."""
    buffer, now = io.BytesIO(), int(time.time())
    folders = sorted({"/".join(path.split("/")[:depth]) for path, _, _ in entries
                      for depth in range(1, path.count("/") + 1)})
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name in folders:
            folder = tarfile.TarInfo(name)
            folder.type, folder.mode, folder.uid, folder.gid = tarfile.DIRTYPE, 0o755, uid, gid
            folder.mtime = now
            archive.addfile(folder)
        for path, data, mode in entries:
            member = tarfile.TarInfo(path)
            member.size, member.mode, member.uid, member.gid = len(data), mode, uid, gid
            member.mtime = now
            archive.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


def shell_upload(root: str, entries: list[tuple[str, bytes, int]]) -> str:
    """A bash command writing files ``(path below root, bytes, mode)`` under ``root``:
    ``base64 -d`` from here-documents, in a subshell that stops at the first failure."""
    lines = ["(", "set -e"]
    for path, data, mode in entries:
        target = shlex.quote(f"{root.rstrip('/')}/{path}")
        lines += [f"mkdir -p -- \"$(dirname -- {target})\"",
                  f"base64 -d > {target} <<'__mol_upload__'",
                  base64.encodebytes(data).decode("ascii") + "__mol_upload__",
                  f"chmod {mode & 0o7777:o} {target}"]
    lines.append(")")
    return "\n".join(lines)


DONE = "__mol_file_done__"
"""What a ``shell_write`` / ``shell_read`` command prints last when it succeeded (no
base64 text contains an underscore)."""


def shell_write(target: str, data: bytes, mode: int) -> str:
    """A bash command writing one file (its folders too, 0755) as the user running it,
    printing ``DONE``; it leaves ``$?`` as the previous command left it."""
    quoted = shlex.quote(target)
    return (f"( __mol_status=$?; umask 022; command mkdir -p -- \"$(command dirname -- "
            f"{quoted})\" && command base64 -d > {quoted} <<'__mol_upload__' && "
            f"command chmod {mode & 0o7777:o} -- {quoted} && builtin printf '%s\\n' {DONE}\n"
            f"{base64.encodebytes(data).decode('ascii')}__mol_upload__\n"
            "exit $__mol_status )")


def shell_read(path: str) -> str:
    """A bash command printing one file in base64, then ``DONE`` on a line of its own;
    it leaves ``$?`` as the previous command left it."""
    return (f"( __mol_status=$?; command base64 -w 0 -- {shlex.quote(path)} && "
            f"builtin printf '\\n%s\\n' {DONE}; exit $__mol_status )")


def shell_done(output: str) -> str | None:
    """The output of a ``shell_write`` / ``shell_read`` command before ``DONE``, or
    ``None`` when it did not get there."""
    body, marker, rest = output.rpartition(DONE)
    return body if marker and rest.strip() == "" else None


def shell_untar(folder: str, archive: bytes) -> str:
    """A bash command extracting a tar archive into ``folder`` (modes kept, owned by the
    user running it)."""
    return (f"base64 -d <<'__mol_upload__' | tar -x -p --no-same-owner -f - -C "
            f"{shlex.quote(folder)}\n{base64.encodebytes(archive).decode('ascii')}"
            "__mol_upload__")


def rebase(archive: bytes, *, uid: int, gid: int) -> bytes:
    """A ``get_archive`` tar of a folder, re-rooted to extract *into* a folder: the top
    entry is dropped, the rest lose their first path component and belong to ``uid:gid``."""
    out = io.BytesIO()
    with (tarfile.open(fileobj=io.BytesIO(archive), mode="r") as source,
          tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as target):
        for member in source:
            _, _, rest = member.name.partition("/")
            if not rest:
                continue
            member.name, member.uid, member.gid, member.uname, member.gname = (
                rest, uid, gid, "", "")
            if member.islnk():
                member.linkname = member.linkname.partition("/")[2]
            target.addfile(member, source.extractfile(member) if member.isfile() else None)
    return out.getvalue()


def unpack(archive: bytes, path: str) -> bytes:
    """The one regular file in a tar archive from ``get_archive``."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r") as tar:
        for member in tar:
            if member.isfile():
                extracted = tar.extractfile(member)
                if extracted is not None:
                    return extracted.read()
    raise SandboxError(f"{path}: not a regular file")
