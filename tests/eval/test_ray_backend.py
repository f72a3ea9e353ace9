"""The Ray boundary refuses a cluster that is not there at once, in mol's words."""

from __future__ import annotations

import socket
import time

import pytest

from mol.core.errors import ClusterError
from mol.eval.cluster.ray_backend import Cluster

from .conftest import HCP, SUITE, mol

pytestmark = pytest.mark.ray


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once it is closed


def test_an_address_where_nothing_listens_fails_fast() -> None:
    port = _closed_port()
    address = f"127.0.0.1:{port}"
    began = time.monotonic()
    # Ray itself reads a loopback host as this node's address; the message says which.
    with pytest.raises(ClusterError, match=rf"--ray {address}: nothing answers at \S+:{port}"):
        Cluster.connect(address)
    assert time.monotonic() - began < 30  # ray.init alone would retry for minutes


def test_mol_eval_run_names_the_unreachable_cluster(capsys: pytest.CaptureFixture[str],
                                                    tmp_path) -> None:
    port = _closed_port()
    address = f"127.0.0.1:{port}"
    code, _, err = mol(capsys, "eval", "run", SUITE, "--hcp", HCP, "--agent", "oracle",
                       "--out", tmp_path / "run", "--ray", address)
    assert code == 1 and f"error: --ray {address}: nothing answers at " in err
    assert f":{port} (" in err
    assert "Traceback" not in err
