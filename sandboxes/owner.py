"""Who owns a sandbox container, and removing the ones whose owner is gone.

Every container carries labels naming the runtime process that created it:
host name, kernel boot id, pid and the process's start time (so a recycled
pid is not mistaken for the owner). ``gc_orphans`` removes containers whose
owner is provably gone: same host and boot but no such process any more, or
same host after a reboot. Containers made on another host (a shared remote
engine) are left alone: their owner cannot be checked from here.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from mol.core import __version__
from mol.core.owner import Owner, current

LABEL = "org.mol.sandbox"
"""Present on every sandbox container; its value says where it came from: ``session``
(started for one) or ``pool`` (started ahead, for whichever session takes it); egress
gateways and their networks carry ``egress``, and the never-started containers an image's
files are read from ``probe``. Labels
never change, so the session a sandbox belongs to is in its name (``container_name``)."""
OWNER = "org.mol.owner"
"""``host/boot-id/pid/start-ticks`` of the runtime process that created the container."""
VERSION = "org.mol.version"
"""The mol version that created the container."""


def labels(origin: str) -> dict[str, str]:
    """The labels of a new sandbox container owned by this process (``origin``: ``session``
    or ``pool``)."""
    return {LABEL: origin, OWNER: current().label(), VERSION: __version__}


POOL_NAME = "pool"
_NAME = re.compile(r"^/?mol-(?:s-(?P<session>[A-Za-z0-9_.-]+)|pool)-[0-9a-f]{8}$")


def container_name(session_id: str | None) -> str:
    """A container name saying whose sandbox it is: ``mol-s-<session>-<8 hex>``, or
    ``mol-pool-<8 hex>`` for a pool's waiting one (``None``). Characters Docker does not
    allow in names become ``_``; long session ids are cut."""
    suffix = secrets.token_hex(4)
    if session_id is None:
        return f"mol-{POOL_NAME}-{suffix}"
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", session_id or "-")[:96]
    return f"mol-s-{safe}-{suffix}"


def session_of(name: str) -> str | None:
    """The (name-safe) session id a container name says, ``None`` for a pool's waiting one."""
    match = _NAME.match(name)
    return match["session"] if match else None


async def gc_orphans() -> list[str]:
    """Remove sandbox containers (and egress gateways and networks) whose owning runtime
    is gone; returns their ids.

    The runtime calls this at startup; ``mol sandbox gc`` calls it on demand.
    """
    from mol.sandboxes import docker

    removed = []
    for info in await docker.call(docker.list_containers, LABEL, what="list sandboxes"):
        if _orphaned(info):
            await docker.call(docker.remove_container, info["Id"],
                              what="remove an orphan sandbox")
            removed.append(info["Id"])
    # Egress networks go after their containers (a network in use cannot be removed).
    for info in await docker.call(docker.list_networks, LABEL, what="list sandbox networks"):
        if _orphaned(info):
            await docker.call(docker.remove_network, info["Id"], what="remove an orphan network")
            removed.append(info["Id"])
    return removed


def _orphaned(info: dict[str, Any]) -> bool:
    found = Owner.parse((info.get("Labels") or {}).get(OWNER, ""))
    return found is not None and found.alive() is False
