"""The one module that imports Ray; every Ray error is translated here.

Ray is an optional extra (``pip install 'mol-agent[ray]'``) imported only when a command
asks for it (``mol eval run --ray``), never by ``mol --help`` or a local run::

    Ray not installed                                    -> ClusterError naming the extra
    ray.init failing (no cluster there, versions differ) -> ClusterError naming the address
    NodeDiedError, WorkerCrashedError, LocalRayletDied   -> NodeLost
    RayTaskError (the task raised), any other RayError   -> ClusterError

Episodes are Ray tasks needing one ``mol_sandbox_slot`` and no CPU (they wait on Docker
and the engine), with Ray's own retries off: the driver decides what a lost node means
(``mol.eval.cluster.backend``). ``--ray local`` starts a private one-node Ray on loopback with a
temporary folder of its own and no dashboard; ``auto`` and addresses are Ray's
(``RAY_ADDRESS``, a ``ray start`` head on this machine, ``HOST:PORT``, ``ray://...``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from mol.core.errors import ClusterError, NodeLost

SLOT = "mol_sandbox_slot"
"""The custom resource a node advertises: how many sandboxes its Docker engine holds."""
EXTRA = "pip install 'mol-agent[ray]'"
PROBE = 5.0
"""Seconds to wait for the cluster's address to accept a connection."""


@functools.cache
def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ClusterError(f"--ray needs Ray, which is not installed: {EXTRA}") from exc
    _errors_to_stderr()
    return ray


def _errors_to_stderr() -> None:
    """Ray's driver prints the cluster's error messages (a node that died, with the tail of
    its log) to stdout, whatever ``log_to_driver`` says: that would break ``--json`` and
    the summary. Send them to stderr, beside the progress lines (Ray 2.60's module-level
    printer, which its listener thread looks up on each message)."""
    from ray._private import worker

    original = getattr(worker, "print_to_stdstream", None)
    if original is None or getattr(original, "mol_stderr", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        original({**data, "is_err": True}, ignore_prefix)

    to_stderr.mol_stderr = True  # type: ignore[attr-defined]
    worker.print_to_stdstream = to_stderr


@contextmanager
def translated(what: str) -> Iterator[None]:
    """Translate what Ray raises while doing ``what``."""
    exceptions = _ray().exceptions
    try:
        yield
    except (exceptions.NodeDiedError, exceptions.WorkerCrashedError,
            exceptions.LocalRayletDiedError) as exc:
        raise NodeLost(_first_line(exc)) from exc
    except exceptions.RayTaskError as exc:
        cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else exc
        raise ClusterError(f"{what}: {type(cause).__name__}: {_first_line(cause)}") from exc
    except exceptions.RayError as exc:
        raise ClusterError(f"{what}: {type(exc).__name__}: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0][:300] if lines else type(exc).__name__


@dataclass(frozen=True)
class Node:
    """A live node of the cluster that advertises sandbox slots."""

    node_id: str
    address: str
    hostname: str
    slots: float

    @property
    def name(self) -> str:
        """``HOST/NODEID8``, as in the ``placement`` column."""
        return f"{self.hostname}/{self.node_id[:8]}"


def placement() -> str:
    """Where the calling Ray task runs: ``ray:HOST/NODEID8``."""
    return f"ray:{socket.gethostname()}/{_ray().get_runtime_context().get_node_id()[:8]}"


def _mol_episode(spec: Any, hcp: Any, tree: Any) -> dict[str, Any]:
    """The Ray task of one episode (on a node; Ray resolved the two objects it was sent)."""
    from mol.eval.cluster.remote import run

    return run(spec, hcp, tuple(tree), placement())


@functools.cache
def _episode_task() -> Any:
    return _ray().remote(num_cpus=0, resources={SLOT: 1}, max_retries=0)(_mol_episode)


class Pending:
    """An episode's task in flight."""

    def __init__(self, ref: Any) -> None:
        self.ref = ref
        self._future = asyncio.wrap_future(ref.future())

    async def result(self) -> Any:
        """What the task returned, once it did (cancelling the wait leaves the task be)."""
        await asyncio.wait({self._future})
        with translated("an episode's task failed"):
            return self._future.result()

    def cancel(self) -> None:
        """Stop the task (killing its worker if it runs)."""
        ray = _ray()
        with contextlib.suppress(ray.exceptions.RayError, ValueError):
            ray.cancel(self.ref, force=True)


def _probe(address: str) -> None:
    """Fail at once when nothing listens at the cluster's address (``ray.init`` would keep
    trying for minutes). ``auto`` is resolved the way Ray does; ``ray://`` is left to Ray."""
    if address.startswith("ray://"):
        return
    from ray._private.services import canonicalize_bootstrap_address

    found = canonicalize_bootstrap_address(address)
    if found is None:
        raise ClusterError(f"--ray {address}: no Ray cluster found (RAY_ADDRESS is unset and "
                           "no 'ray start' head runs here): give --ray HOST:PORT, or --ray local")
    host, _, port = found.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE).close()
    except (OSError, ValueError) as exc:
        raise ClusterError(f"--ray {address}: nothing answers at {found} ({exc})") from exc


class Cluster:
    """The driver's connection to a Ray cluster (blocking calls; run them in a thread)."""

    def __init__(self, address: str, folder: str | None) -> None:
        self.address = address
        self._folder = folder
        """The temporary folder of a private ``local`` Ray, removed at ``close``."""

    @classmethod
    def connect(cls, address: str, *, slots: int = 1) -> Cluster:
        """Join the cluster at ``address`` (``local``: start one with ``slots``)."""
        ray = _ray()
        # Never phone home, whatever the node's settings say for this process.
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
        folder = None
        try:
            if address == "local":
                folder = tempfile.mkdtemp(prefix="mol-ray-")
                info = ray.init(address="local", num_cpus=1, resources={SLOT: slots},
                                include_dashboard=False, _temp_dir=folder,
                                _node_ip_address="127.0.0.1", **quiet)
            else:
                _probe(address)
                info = ray.init(address=address, **quiet)
        except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
            if folder:
                shutil.rmtree(folder, ignore_errors=True)
            raise ClusterError(f"--ray {address}: cannot join the Ray cluster: "
                               f"{_first_line(exc)}") from exc
        return cls(getattr(info, "address_info", {}).get("gcs_address") or address, folder)

    def close(self) -> None:
        """Leave the cluster (and stop a private ``local`` one)."""
        _ray().shutdown()
        if self._folder:
            shutil.rmtree(self._folder, ignore_errors=True)

    def put(self, value: Any) -> Any:
        """Store ``value`` in the cluster once; tasks that take it fetch it once per node."""
        with translated("send to the cluster"):
            return _ray().put(value)

    def submit(self, spec: Any, hcp: Any, tree: Any) -> Pending:
        """Start one episode's task on whichever node has a free slot."""
        with translated("submit an episode"):
            task = _episode_task().options(name=f"mol-episode {spec.task} #{spec.epoch}")
            return Pending(task.remote(spec, hcp, tree))

    def slots(self) -> float:
        """Sandbox slots the live nodes advertise in all."""
        with translated("read the cluster's resources"):
            return float(_ray().cluster_resources().get(SLOT, 0))

    def nodes(self) -> list[Node]:
        """The live nodes that advertise sandbox slots."""
        with translated("list the cluster's nodes"):
            found = _ray().nodes()
        return [Node(n["NodeID"], n.get("NodeManagerAddress", "?"),
                     n.get("NodeManagerHostname", "?"), float(n["Resources"][SLOT]))
                for n in found if n.get("Alive") and n.get("Resources", {}).get(SLOT)]

    def driver_address(self) -> str:
        """The IP address this driver has in the cluster."""
        return _ray().util.get_node_ip_address()
