"""Hardening defaults: no network, no capabilities, read-only root, limits, no Docker socket."""

from __future__ import annotations

import pytest

from mol.sandboxes import docker
from mol.sandboxes.sandbox import Sandbox

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


async def test_no_capabilities_and_no_new_privileges(sandbox: Sandbox) -> None:
    status = await sandbox.run("grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs):' /proc/self/status")
    fields = dict(line.split(":\t") for line in status.output.splitlines())
    assert fields == {"CapEff": "0000000000000000", "CapPrm": "0000000000000000",
                      "CapBnd": "0000000000000000", "NoNewPrivs": "1"}


async def test_runs_as_the_images_non_root_user(sandbox: Sandbox) -> None:
    who = await sandbox.run("id -u; id -un; stat -c '%U %a' /workspace")
    assert who.output == "1000\nmol\nmol 755\n"


async def test_network_attempts_fail(sandbox: Sandbox) -> None:
    connect = await sandbox.run(
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)\"",
        timeout=20)
    assert connect.exit_code != 0 and "Network is unreachable" in connect.output
    dns = await sandbox.run("getent hosts deb.debian.org", timeout=20)
    assert dns.exit_code != 0 and dns.output == ""
    tcp = await sandbox.run("echo hi > /dev/tcp/1.1.1.1/80", timeout=20)
    assert tcp.exit_code != 0 and "Network is unreachable" in tcp.output
    links = await sandbox.run("ls /sys/class/net")
    assert links.output.split() == ["lo"]


async def test_writes_outside_the_writable_places_fail(sandbox: Sandbox) -> None:
    for path in ["/etc/evil", "/usr/bin/evil", "/evil", "/home/mol/evil", "/var/tmp/evil"]:
        result = await sandbox.run(f"echo x > {path}")
        assert result.exit_code == 1 and "Read-only file system" in result.output, path
    for path in ["/workspace/ok", "/tmp/ok"]:
        assert (await sandbox.run(f"echo x > {path} && rm {path}")).exit_code == 0


async def test_no_docker_socket_and_no_host_paths(sandbox: Sandbox) -> None:
    found = await sandbox.run("ls /var/run/docker.sock /run/docker.sock 2>&1; "
                              "grep -c docker.sock /proc/mounts")
    assert "No such file" in found.output and found.output.rstrip().endswith("0")
    host = await docker.call(docker.client().api.inspect_container, sandbox.id,
                             what="inspect the sandbox")
    config = host["HostConfig"]
    assert not config["Binds"] and [m["Type"] for m in host["Mounts"]] == ["volume"]
    assert config["CapDrop"] == ["ALL"] and config["SecurityOpt"] == ["no-new-privileges"]
    assert config["ReadonlyRootfs"] and config["Init"] and config["NetworkMode"] == "none"
    assert config["Memory"] == config["MemorySwap"] == 2 << 30
    assert config["PidsLimit"] == 256 and config["NanoCpus"] == 10**9
    assert config["LogConfig"]["Type"] == "none" and not config["Privileged"]


async def test_the_workspace_and_tmp_are_size_capped_tmpfs(sandbox: Sandbox) -> None:
    mounts = await sandbox.run("df -m --output=target,fstype,size /workspace /tmp | tail -n +2")
    rows = [line.split() for line in mounts.output.splitlines()]
    assert rows == [["/workspace", "tmpfs", "1024"], ["/tmp", "tmpfs", "256"]]


async def test_init_reaps_orphaned_zombies(sandbox: Sandbox) -> None:
    await sandbox.run("(sleep 0.1 &) ; sleep 0.5")
    zombies = await sandbox.run("ps -eo stat= | grep -c '^Z' || true")
    assert zombies.output == "0\n"
    assert (await sandbox.run("ps -p 1 -o comm=")).output == "docker-init\n"
