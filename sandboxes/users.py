"""Which user a sandbox runs as, as numeric ids (the workspace volume is created owned by them).

``[sandbox] user`` wins; else the image's ``USER``; else the image's ``mol``
user when its ``/etc/passwd`` has one; else root (still without capabilities).
Names are looked up in the image's ``/etc/passwd``, read once per image.
"""

from __future__ import annotations

from typing import Any

from mol.core.errors import SandboxError
from mol.hcp.schema import SandboxConfig

DEFAULT_USER = "mol"
"""The non-root user ``mol sandbox image build`` creates (uid 1000)."""

_passwd_cache: dict[str, dict[str, tuple[int, int]]] = {}


def parse_passwd(text: str) -> dict[str, tuple[int, int]]:
    """``/etc/passwd`` as name -> (uid, gid)."""
    users = {}
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) >= 4 and fields[2].isdigit() and fields[3].isdigit():
            users[fields[0]] = (int(fields[2]), int(fields[3]))
    return users


def _numeric(spec: str) -> tuple[int, int] | None:
    uid, _, gid = spec.partition(":")
    if uid.isdigit() and (gid.isdigit() or not gid):
        return int(uid), int(gid or uid)
    return None


async def _passwd(image: dict[str, Any]) -> dict[str, tuple[int, int]]:
    from mol.sandboxes import docker, owner

    key = image["Id"]
    if key not in _passwd_cache:
        data = await docker.call(docker.read_image_file, key, "/etc/passwd",
                                 owner.labels("probe"), what="read the image's /etc/passwd")
        from mol.sandboxes.files import unpack

        text = unpack(data, "/etc/passwd").decode("utf-8", "replace") if data else ""
        _passwd_cache[key] = parse_passwd(text)
    return _passwd_cache[key]


async def resolve_user(config: SandboxConfig, image: dict[str, Any]) -> tuple[int, int]:
    """(uid, gid) the sandbox runs as."""
    spec = config.user or (image.get("Config") or {}).get("User") or ""
    numeric = _numeric(spec)
    if numeric:
        return numeric
    users = await _passwd(image)
    name, _, group = spec.partition(":")
    if not name:
        return users.get(DEFAULT_USER, (0, 0))
    if name not in users:
        raise SandboxError(f"[sandbox] user {name!r} is not in /etc/passwd of image "
                           f"{config.image}")
    uid, gid = users[name]
    if group:
        gid = int(group) if group.isdigit() else gid
    return uid, gid
