"""What a sandbox container is started with: its limits, capabilities and environment.

The options come from the artifact's ``[sandbox]`` (docs/sandboxes.md): no
network unless asked, a read-only root, tmpfs workspace and ``/tmp``, memory,
CPU and pid limits, no new privileges, and only the capabilities the two root
shells need.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mol.hcp.schema import SandboxConfig

__all__ = ["ENVIRONMENT", "ROOT_CAPABILITIES", "hardening"]

ENVIRONMENT = {
    "TERM": "dumb",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "LANG": "C.UTF-8",
    "DEBIAN_FRONTEND": "noninteractive",
    "TMPDIR": "/tmp",
}
"""Variables every sandbox starts with: no pagers or colour prompts waiting for a human."""

ROOT_CAPABILITIES = ["KILL", "SETUID", "SETGID", "SETPCAP"]
"""All the two root shells of a sandbox keep: signalling commands (the control shell),
becoming the sandbox user and emptying its capability bounding set (the command shell).
Commands run without any capability (see ``mol.sandboxes.scripts``)."""


def _volume(target: str, size: str, uid: int, gid: int) -> dict[str, Any]:
    """A tmpfs-backed volume at ``target`` owned by the sandbox user (see docs/sandboxes.md)."""
    return {"target": target, "driver_opts": {
        "type": "tmpfs", "device": "tmpfs",
        "o": f"size={size},uid={uid},gid={gid},mode=0755,nosuid,nodev"}}



def hardening(config: SandboxConfig, *, uid: int, gid: int,
              mounts: Sequence[str] = ()) -> dict[str, Any]:
    """Container options enforcing ``config``'s limits (see docs/sandboxes.md); each of
    ``mounts`` is one more writable folder, a tmpfs of ``tmp_size``.

    The container's own processes (init and the control shell) are root with only
    ``ROOT_CAPABILITIES``; every command runs as ``uid:gid`` without capabilities.
    """
    options: dict[str, Any] = {
        "user": "0:0",
        "network_mode": config.network,
        "cap_drop": ["ALL"],
        "cap_add": ROOT_CAPABILITIES,
        "security_opt": ["no-new-privileges"],
        "pids_limit": config.pids_limit,
        "mem_limit": config.memory,
        "memswap_limit": config.memory,  # equal to the memory limit: no swap on top
        "nano_cpus": int(config.cpus * 1e9),
        "init": True,
        "read_only": config.read_only_root,
        "tmpfs": {"/tmp": f"size={config.tmp_size},mode=1777,exec,nosuid,nodev"},
        "shm_size": "64m",
        "ipc_mode": "private",
        "log_config": {"type": "none"},  # output never piles up in the engine's log files
        "volume_mounts": [_volume(config.workspace, config.workspace_size, uid, gid),
                          *(_volume(target, config.tmp_size, uid, gid) for target in mounts)],
    }
    if config.runtime:
        options["runtime"] = config.runtime
    return options
