"""A sandbox's files: in and out through its shell when small, else Docker's archive API.

``SandboxFiles``, the base class of ``Sandbox``, holds the file operations: ``read_file``,
``write_file``, ``upload``, ``list_dir`` and the seed (the image's workspace folder copied
into a new sandbox). Docker's archive API starts a process in the engine for every call
(~50 ms of CPU, about 0.1 s to unpack); the persistent shell takes a few milliseconds.
So small files go through the shell (``files.shell_*``, a ``clean`` command as the
sandbox user), and reads, writes and seeds fall back to the archive API when the shell
is busy or the command fails. Which way each transfer takes is a subject of its own,
apart from starting, running and replacing the container (``mol.sandboxes.sandbox``);
the paths and archive formats themselves are ``mol.sandboxes.files``.
"""

from __future__ import annotations

import base64
import contextlib
import shlex
from collections.abc import Iterable
from typing import Any

from mol.core.errors import PathEscape, SandboxError
from mol.sandboxes import docker, files, owner
from mol.sandboxes.result import CommandResult

MAX_FILE_BYTES = 64 << 20
"""Largest file ``read_file`` fetches out of a sandbox."""

SHELL_UPLOAD_BYTES = 256 << 10
"""Uploads and file writes up to this size go through the shell rather than a Docker
archive (small reads too, within ``max_output_bytes``)."""

MAX_SEED_BYTES = 512 << 20
"""Largest image folder copied into a new sandbox's workspace (``seed=True``)."""

_seeds: dict[str, bytes] = {}
"""Image id -> its workspace folder as a tar, for the few most recent images seeded."""


class SandboxFiles:
    """The file operations of a ``Sandbox``, its subclass: they use its container
    (``id``), user (``uid``, ``gid``), ``workspace``, ``mounts``, ``config``, lock, shell
    and ``run``."""

    async def _seed(self, image_id: str) -> None:
        """Copy the image's workspace folder into the workspace volume, owned by the user."""
        if image_id not in _seeds:
            archive = await docker.call(docker.read_image_file, image_id, self.workspace,
                                        owner.labels("probe"), MAX_SEED_BYTES,
                                        what="read the image's workspace")
            while len(_seeds) >= 8:
                _seeds.pop(next(iter(_seeds)))
            _seeds[image_id] = archive or b""
        if not _seeds[image_id]:
            return
        archive = files.rebase(_seeds[image_id], uid=self.uid, gid=self.gid)
        if len(archive) <= 4 * SHELL_UPLOAD_BYTES:
            # As for uploads: a small tree goes faster through the shell's tar than through
            # Docker's archive API; an image without base64 or tar falls back to the latter.
            result = await self.run(files.shell_untar(self.workspace, archive), timeout=120,
                                    clean=True)
            if result.exit_code == 0:
                return
        await docker.call(docker.put_archive, self.id, self.workspace, archive,
                          what="seed the workspace")

    async def _stat(self, path: str) -> dict[str, Any] | None:
        return await docker.call(docker.path_stat, self.id, path, what=f"stat {path}")

    async def read_file(self, path: str, *, limit: int = MAX_FILE_BYTES) -> bytes:
        """The bytes of a file in the workspace."""
        where = await files.locate(self.workspace, path, self._stat)
        if where.missing:
            raise SandboxError(f"{path}: no such file")
        if not where.is_file:
            kind = "a directory" if where.is_dir else "not a regular file"
            raise SandboxError(f"{path}: {kind}")
        size = where.stat.get("size", -1) if where.stat else -1
        if 0 <= size <= min(limit, self.config.max_output_bytes * 3 // 4 - 64):
            text = await self._via_shell(files.shell_read(where.existing))
            with contextlib.suppress(ValueError):  # not base64: fall back to the archive
                if text is not None:
                    return base64.b64decode(text.strip(), validate=True)
        archive, _ = await docker.call(docker.get_archive, self.id, where.existing, limit + 4096,
                                       what=f"read {path}")
        return files.unpack(archive, path)

    async def write_file(self, path: str, data: bytes, *, mode: int | None = None) -> str:
        """Create or replace a file in the workspace (parent folders too); returns its path.

        ``mode`` sets the permission bits; by default a new file gets 0644 and an
        existing one keeps its own.
        """
        where = await files.locate(self.workspace, path, self._stat)
        if not where.missing:
            if where.is_dir:
                raise SandboxError(f"{path}: is a directory")
            folder, name = where.existing.rsplit("/", 1)
            parts, kept = [name], where.stat["mode"] & 0o777 if where.stat else 0o644
            mode = kept if mode is None else mode
        elif where.is_dir:
            folder, parts, mode = where.existing, where.missing, 0o644 if mode is None else mode
        else:
            raise SandboxError(f"{path}: {where.existing} is not a directory")
        target = f"{folder}/{'/'.join(parts)}"
        if len(data) <= SHELL_UPLOAD_BYTES and \
                await self._via_shell(files.shell_write(target, data, mode)) is not None:
            return target
        archive = files.pack(parts, data, uid=self.uid, gid=self.gid, mode=mode)
        await docker.call(docker.put_archive, self.id, folder or "/", archive,
                          what=f"write {path}")
        return target

    async def _via_shell(self, command: str) -> str | None:
        """The output of a ``files.shell_write`` / ``shell_read`` command, ``None`` when it
        failed (no such tool in the image, no permission) or the shell is not idle (a
        command running, a sandbox to replace): the caller then uses Docker's archive API,
        which starts a process of its own for each call (~50 ms of CPU)."""
        if self._lock.locked() or self._lost or not (self._shell and self._shell.alive):
            return None
        result = await self.run(command, timeout=60, clean=True)
        return None if result.dropped_bytes else files.shell_done(result.output)

    async def upload(self, folder: str, entries: Iterable[tuple[str, bytes, int]], *,
                     clear: bool = False) -> None:
        """Put files ``(path relative to folder, bytes, mode)`` into ``folder``: the workspace,
        one of the ``mounts``, or a folder inside one (created as needed). ``clear``: empty
        ``folder`` first (as the sandbox user, in the same shell command when it can)."""
        root = next((r for r in (self.workspace, *self.mounts) if files.inside(r, folder)), None)
        if root is None:
            raise PathEscape(f"{folder}: not inside the workspace or a mount of the sandbox")
        prefix = files.confine(root, folder)
        items = [("/".join([*prefix, *files.confine(root, relative)]), data, mode)
                 for relative, data, mode in entries]
        quoted = shlex.quote("/".join([root.rstrip("/"), *prefix]))
        wipe = f"rm -rf -- {quoted}/* {quoted}/.[!.]*; " if clear else ""
        if sum(len(data) for _, data, _ in items) <= SHELL_UPLOAD_BYTES:
            # Docker unpacks every archive in a process of its own (~0.1 s); a few small
            # files go through the shell in a millisecond.
            result = await self.run(wipe + files.shell_upload(root, items), timeout=60,
                                    clean=True)
            if result.exit_code != 0:
                raise SandboxError(f"cannot upload files to {folder}: {result.output[-500:]}")
            return
        if wipe:
            await self.run(wipe, timeout=60, clean=True)
        await docker.call(docker.put_archive, self.id, root,
                          files.pack_tree(items, uid=self.uid, gid=self.gid),
                          what=f"upload files to {folder}")

    async def list_dir(self, path: str = ".") -> CommandResult:
        """``ls -la`` of a folder in the workspace."""
        where = await files.locate(self.workspace, path, self._stat)
        if where.missing:
            raise SandboxError(f"{path}: no such directory")
        quoted = "'" + where.existing.replace("'", "'\\''") + "'"
        return await self.run(f"command ls -la --group-directories-first -- {quoted}",
                              timeout=30, clean=True)
