"""``[sandbox] egress``: what a sandbox may connect to, enforced outside its container.

- ``open``: the container is on ``network`` as it is (``bridge`` reaches the internet,
  the Docker host's bridge address and private ranges; docs/sandboxes.md lists them);
- ``none``: the container has no network at all, whatever ``network`` says;
- ``allowlist``: the container sits alone on a new *internal* Docker network (no route
  out, no DNS beyond it) with one other member, its ``Gateway``: a container attached to
  ``network`` too, running the proxy of ``mol.sandboxes.gateway`` as host ``egress``. The
  sandbox's ``HTTP_PROXY``/``HTTPS_PROXY`` point there, and the gateway connects only
  where ``egress_allow`` says. Gateway and network carry the sandbox's owner labels, are
  removed with it, and ``gc_orphans`` removes them when their runtime is gone.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import anyio

from mol.core.errors import SandboxError
from mol.hcp.schema import SandboxConfig
from mol.sandboxes import docker, owner
from mol.sandboxes.gateway import PORT, program
from mol.sandboxes.stream import MuxSocket

PROXY_HOST = "egress"
"""The gateway's name on the sandbox's internal network."""

GATEWAY_USER = "65534:65534"
"""The gateway runs as ``nobody``."""

READY_DEADLINE = 30.0
"""Seconds a gateway may take to listen."""


def proxy_environment() -> dict[str, str]:
    """The variables that send an ``allowlist`` sandbox's HTTP(S) clients to its gateway."""
    url = f"http://{PROXY_HOST}:{PORT}"
    return {"HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url,
            "NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1"}


class Gateway:
    """An ``allowlist`` sandbox's internal network and gateway container."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.network = ""
        """The internal network's name (the sandbox's ``network_mode``)."""
        self.container = ""

    async def start(self) -> None:
        """Create the network and start the gateway; ``SandboxError`` if it does not listen."""
        name = f"mol-egress-{secrets.token_hex(6)}"
        labels = owner.labels("egress")
        try:
            await docker.call(docker.create_network, name, internal=True, labels=labels,
                              what="create the sandbox's internal network")
            self.network = name
            self.container = await docker.call(
                docker.create_container, self.config.image, what="create the egress gateway",
                name=name, labels=labels, **self._options())
            await docker.call(docker.connect_network, name, self.container, [PROXY_HOST],
                              what="attach the gateway to the sandbox's network")
            sock = await docker.call(docker.attach_socket, self.container,
                                     what="attach to the gateway")
            await docker.call(docker.start_container, self.container, what="start the gateway")
            await _ready(MuxSocket(sock), self.config.image)
        except BaseException:
            await self.close()
            raise

    def _options(self) -> dict[str, Any]:
        return {
            "entrypoint": ["python3"],
            "command": ["-c", program(), json.dumps(self.config.egress_allow)],
            "user": GATEWAY_USER, "network_mode": self.config.network, "detach": True,
            "stdin_open": True, "cap_drop": ["ALL"], "security_opt": ["no-new-privileges"],
            "read_only": True, "pids_limit": 64, "mem_limit": "128m",
            "memswap_limit": "128m", "nano_cpus": int(0.5e9), "init": True,
            "log_config": {"type": "none"},
        }

    async def close(self) -> None:
        """Remove the gateway and the network; safe to call twice."""
        container, network, self.container, self.network = (
            self.container, self.network, "", "")
        with anyio.CancelScope(shield=True):
            if container:
                await docker.call(docker.remove_container, container,
                                  what="remove the egress gateway")
            if network:
                await docker.call(docker.remove_network, network,
                                  what="remove the sandbox's internal network")


async def _ready(sock: MuxSocket, image: str) -> None:
    said = b""
    try:
        with anyio.fail_after(READY_DEADLINE):
            while b"ready\n" not in said:
                for _, payload in await sock.receive():
                    said = (said + payload)[-4096:]
    except (TimeoutError, anyio.EndOfStream) as exc:
        raise SandboxError(f"the egress gateway (image {image}, which needs python3) did not "
                           f"start: {said.decode('utf-8', 'replace').strip() or exc}") from None
    finally:
        sock.close()
