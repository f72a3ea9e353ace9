"""``[sandbox] egress``: ``none`` cuts the network whatever ``network`` says; ``allowlist``
reaches only its list, through a gateway outside the sandbox.

The targets are web servers this module starts on a Docker network it creates, so nothing
outside the test is ever contacted.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from mol.hcp.schema import SandboxConfig
from mol.sandboxes import docker, owner
from mol.sandboxes.sandbox import Sandbox

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

IMAGE = "mol-sandbox:bookworm"


@dataclass
class Targets:
    """A Docker network of the test's own, with two web servers on it."""

    network: str
    allowed: str
    denied: str
    gateway: str
    """The network's own gateway address: the Docker host, as a container sees it."""


async def web_server(network: str) -> str:
    container = await docker.call(
        docker.create_container, IMAGE, what="create a target",
        entrypoint=["python3"], command=["-m", "http.server", "8000", "-d", "/etc"],
        user="65534:65534", network_mode=network, detach=True, cap_drop=["ALL"],
        read_only=True, labels={"org.mol.test": "egress"})
    await docker.call(docker.start_container, container, what="start a target")
    return container


@pytest.fixture(scope="module")
async def targets(anyio_backend: str) -> AsyncIterator[Targets]:
    name = f"mol-test-egress-{secrets.token_hex(4)}"
    await docker.call(docker.create_network, name, internal=False,
                      labels={"org.mol.test": "egress"}, what="create the test network")
    containers: list[str] = []
    try:
        containers = [await web_server(name), await web_server(name)]
        addresses = [await docker.call(docker.container_address, c, name, what="inspect")
                     for c in containers]
        info = await docker.call(docker.client().api.inspect_network, name, what="inspect")
        gateway = info["IPAM"]["Config"][0]["Gateway"]
        yield Targets(name, addresses[0], addresses[1], gateway)
    finally:
        for container in containers:
            await docker.call(docker.remove_container, container, what="remove a target")
        await docker.call(docker.remove_network, name, what="remove the test network")


FETCH = """python3 - <<'EOF'
import urllib.request, urllib.error
try:
    print(urllib.request.urlopen("http://{where}/hostname", timeout=10).status)
except urllib.error.HTTPError as error:
    print(error.code, error.read().decode().strip())
except OSError as error:
    print("failed", error)
EOF"""

TUNNEL = """python3 - <<'EOF'
import http.client
connection = http.client.HTTPConnection("egress", 3128, timeout=10)
connection.set_tunnel("{where}")
try:
    connection.request("GET", "/hostname")
    print(connection.getresponse().status)
except OSError as error:
    print("refused", error)
EOF"""

DIRECT = """python3 -c "
import socket
try:
    socket.create_connection(('{host}', {port}), timeout=3); print('connected')
except OSError as error:
    print('failed', error)"
"""


async def test_an_allowlist_sandbox_reaches_its_list_and_nothing_else(targets: Targets) -> None:
    config = SandboxConfig(network=targets.network, egress="allowlist",
                           egress_allow=[f"{targets.allowed}:8000", "*.example.org"])
    async with Sandbox(config, session_id="test-egress") as sandbox:
        allowed = f"{targets.allowed}:8000"
        assert (await sandbox.run(FETCH.format(where=allowed))).output == "200\n"
        assert (await sandbox.run(TUNNEL.format(where=allowed))).output == "200\n"
        for where in [f"{targets.denied}:8000", f"{targets.allowed}:22",
                      f"{targets.gateway}:8000", "169.254.169.254:80"]:
            refused = await sandbox.run(FETCH.format(where=where), timeout=30)
            assert refused.output.startswith("403 ") and "egress_allow" in refused.output, where
        tunnel = await sandbox.run(TUNNEL.format(where=f"{targets.denied}:8000"), timeout=30)
        assert tunnel.output.startswith("refused"), tunnel.output
        # Without the proxy there is no way out: the sandbox is alone with its gateway.
        for host, port in [(targets.allowed, 8000), (targets.gateway, 8000)]:
            direct = await sandbox.run(DIRECT.format(host=host, port=port), timeout=30)
            assert direct.output.startswith("failed"), direct.output
        gateway_id, network = sandbox._gateway.container, sandbox._gateway.network
    names = {n["Name"] for n in await docker.call(docker.list_networks, owner.LABEL,
                                                   what="list networks")}
    assert network not in names
    assert gateway_id not in {c["Id"] for c in await docker.call(
        docker.list_containers, owner.LABEL, what="list sandboxes")}


async def test_egress_none_cuts_the_network_whatever_network_says(targets: Targets) -> None:
    config = SandboxConfig(network=targets.network, egress="none")
    async with Sandbox(config, session_id="test-egress-none") as sandbox:
        links = await sandbox.run("ls /sys/class/net")
        assert links.output.split() == ["lo"]
        direct = await sandbox.run(DIRECT.format(host=targets.allowed, port=8000), timeout=30)
        assert direct.output.startswith("failed")


async def test_open_egress_on_a_bridge_reaches_the_docker_host_and_neighbours(
        targets: Targets) -> None:
    # What bridge mode exposes (docs/sandboxes.md): the reason the allowlist exists.
    async with Sandbox(SandboxConfig(network=targets.network), session_id="test-open") as box:
        for host in (targets.allowed, targets.denied):
            reached = await box.run(DIRECT.format(host=host, port=8000), timeout=30)
            assert reached.output == "connected\n"
