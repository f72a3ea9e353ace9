"""``mol eval worker``: make this machine a node that runs episodes for ``mol eval run --ray``.

It checks what episodes will need here (a Docker engine that answers, the sandbox image),
then runs Ray's own ``ray start`` in the foreground with the one thing mol adds, the
``mol_sandbox_slot`` resource: as many slots as this Docker engine should hold sandboxes
at once. The line it runs is printed first, so a machine set up by hand (or by a cluster
launcher) can use it as it is.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass

from mol.core.errors import ClusterError, MolError, UsageError

SLOT = "mol_sandbox_slot"
"""The resource episodes ask for (``mol.eval.cluster.ray_backend.SLOT``, which imports Ray)."""


@dataclass
class WorkerOptions:
    """What ``mol eval worker`` was asked to do."""

    slots: int
    address: str | None = None
    """The head's ``HOST:PORT`` (``None``: Ray reads ``RAY_ADDRESS``)."""
    head: bool = False
    """Start the head node here instead of joining one (``port`` is then its port)."""
    port: int = 6379
    num_cpus: int = 1
    """CPUs Ray may schedule here: episodes take none, so 1 leaves room for Ray's own."""
    node_ip: str | None = None
    temp_dir: str | None = None
    image: str = "mol-sandbox:bookworm"


def start_argv(options: WorkerOptions) -> list[str]:
    """The ``ray start`` command line for this node (run with this Python)."""
    if options.slots < 1:
        raise UsageError("--slots takes a positive number: the sandboxes this machine's "
                         "Docker engine holds at once")
    argv = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block",
            "--disable-usage-stats", f"--num-cpus={options.num_cpus}",
            f"--resources={json.dumps({SLOT: options.slots})}"]
    if options.head:
        argv += ["--head", f"--port={options.port}", "--include-dashboard=false"]
    elif options.address or os.environ.get("RAY_ADDRESS"):
        # ray start itself insists on --address: RAY_ADDRESS is only read by drivers.
        argv.append(f"--address={options.address or os.environ['RAY_ADDRESS']}")
    if options.node_ip:
        argv.append(f"--node-ip-address={options.node_ip}")
    if options.temp_dir:
        argv.append(f"--temp-dir={options.temp_dir}")
    return argv


async def check_node(image: str, say: Callable[[str], None]) -> None:
    """Docker must answer; a missing sandbox image is said (tasks with a Dockerfile still
    build theirs here)."""
    from mol.sandboxes import docker

    if not await docker.call(docker.image_exists, image, what=f"look up image {image}"):
        say(f"warning: this Docker engine has no {image}: episodes of tasks without an "
            "environment/Dockerfile will fail here until 'mol sandbox image build' makes it")


async def serve(options: WorkerOptions, say: Callable[[str], None]) -> None:
    """Check this node, then become ``ray start`` (which stops the node on SIGINT or SIGTERM,
    after draining it)."""
    if importlib.util.find_spec("ray") is None:
        raise ClusterError("mol eval worker needs Ray, which is not installed: "
                           "pip install 'mol-agent[ray]'")
    if not (options.head or options.address or os.environ.get("RAY_ADDRESS")):
        raise UsageError("give --address HOST:PORT of the head node (or set RAY_ADDRESS, or "
                         "--head to start the head node here)")
    argv = start_argv(options)
    try:
        await check_node(options.image, say)
    except MolError as exc:
        raise ClusterError(f"this machine cannot run episodes: {exc}") from exc
    say(f"{options.slots} sandbox slot{'s' * (options.slots != 1)}; running: "
        f"{shlex.join(['ray', *argv[3:]])}")
    os.execv(sys.executable, argv)
