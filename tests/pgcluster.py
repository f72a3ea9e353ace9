"""A throwaway PostgreSQL server for the tests: ``initdb`` in a temp dir, on loopback.

Debian's ``postgresql`` package provides the binaries (``./test`` installs it; the tests
that use it are marked ``postgres``, which tests/services.py checks before the first test).
PostgreSQL refuses to run as root, so as root the cluster belongs to the
``postgres`` system user the package creates. Each test gets its own database.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def _binary(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [shutil.which(name)]
    if not found[-1]:
        raise RuntimeError(f"PostgreSQL's {name} is not installed: apt-get install postgresql")
    return found[-1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresCluster:
    """One running server; ``database()`` makes a fresh database and returns its URL."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="mol-pg-"))
        self.port = _free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
            self._as = ["runuser", "-u", "postgres", "--"]
        self._count = 0
        data = self.root / "data"
        self._run([_binary("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                   "--no-sync", "-E", "UTF8"])
        self._run([_binary("pg_ctl"), "-D", str(data), "-l", str(self.root / "log"), "-w",
                   "-o", f"-h 127.0.0.1 -p {self.port} -k {self.root} -c fsync=on "
                   "-c max_connections=200", "start"])

    def _run(self, command: list[str]) -> None:
        done = subprocess.run([*self._as, *command], capture_output=True, text=True,
                              timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{command[0]} failed: {done.stderr or done.stdout}")

    @property
    def base(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}"

    def database(self) -> str:
        """A new, empty database's URL."""
        self._count += 1
        name = f"mol_test_{self._count}_{int(time.time() * 1000) % 100000}"
        self._run([_binary("createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                   "-U", "postgres", name])
        return f"{self.base}/{name}"

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its files."""
        try:
            self._run([_binary("pg_ctl"), "-D", str(self.root / "data"), "-m", "fast", "-w",
                       "stop"])
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
