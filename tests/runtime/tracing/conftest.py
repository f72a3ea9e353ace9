"""Fixtures of the tracing tests: Arize Phoenix, a real OTLP receiver (``phoenix``, one per
module that uses it), and what they share with the other tests.

Phoenix is ``phoenix serve`` from the venv ./test makes for it (its pins clash with mol's
test dependencies, so it lives apart: ``tests/services.py`` says where), on free loopback
ports, its spans read back through its own REST API (``GET /v1/projects/{project}/spans``),
never through mol's SDK."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ...conftest import hcp_text as hcp_text  # re-exported for the tests here
from ...eval.conftest import PASS as PASS
from ...eval.conftest import mol as mol
from ...eval.conftest import write_task as write_task
from ...services import phoenix_home

START_SEC = 240.0
"""How long Phoenix may take to answer (about 30 s on two busy cores: it migrates its
database and loads its app)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Phoenix:
    """One ``phoenix serve`` process with its own working folder (a fresh SQLite store)."""

    def __init__(self, folder: Path) -> None:
        self.port, self.grpc_port = free_port(), free_port()
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("OTEL_", "PHOENIX_"))}
        env.update(PHOENIX_WORKING_DIR=str(folder), PHOENIX_HOST="127.0.0.1",
                   PHOENIX_PORT=str(self.port), PHOENIX_GRPC_PORT=str(self.grpc_port),
                   PHOENIX_TELEMETRY_ENABLED="false")
        folder.mkdir(parents=True, exist_ok=True)
        self.log = folder / "phoenix.log"
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen([str(phoenix_home() / "bin" / "phoenix"), "serve"],
                                         stdout=out, stderr=subprocess.STDOUT, env=env)
        self.url = f"http://127.0.0.1:{self.port}"
        """The HTTP address: its UI, REST API and OTLP/HTTP receiver (``/v1/traces``)."""
        self.grpc_url = f"http://127.0.0.1:{self.grpc_port}"
        """The OTLP/gRPC receiver."""
        self.http = httpx.Client(base_url=self.url, timeout=30)
        deadline = time.monotonic() + START_SEC
        while not self._healthy():
            assert self.proc.poll() is None, f"phoenix exited: {self.log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "phoenix did not answer in time"
            time.sleep(0.5)

    def _healthy(self) -> bool:
        try:
            return self.http.get("/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    def spans(self, trace_id: str | None = None, project: str = "default") -> list[dict[str, Any]]:
        """Every span Phoenix stored (of one trace, when ``trace_id`` is given)."""
        found: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": 1000}
        if trace_id is not None:
            params["trace_id"] = trace_id
        while True:
            reply = self.http.get(f"/v1/projects/{project}/spans", params=params)
            if reply.status_code == 404:  # no span yet: the project is made by the first
                return found
            reply.raise_for_status()
            body = reply.json()
            found += body["data"]
            if not body.get("next_cursor"):
                return found
            params["cursor"] = body["next_cursor"]

    def wait(self, trace_id: str | None, done: Any, timeout: float = 60.0
             ) -> list[dict[str, Any]]:
        """The spans once ``done(spans)`` holds (Phoenix stores what it receives in batches)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans(trace_id)
            if done(spans):
                return spans
            assert time.monotonic() < deadline, (
                f"phoenix did not get the spans in time; it has {len(spans)}: "
                f"{sorted(span['name'] for span in spans)}")
            time.sleep(0.3)

    def close(self) -> None:
        self.http.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def tree(spans: list[dict[str, Any]]) -> dict[str | None, list[dict[str, Any]]]:
    """Spans by their parent's span id (None: the roots)."""
    children: dict[str | None, list[dict[str, Any]]] = {}
    for span in spans:
        children.setdefault(span["parent_id"], []).append(span)
    return children


def span_id(span: dict[str, Any]) -> str:
    return span["context"]["span_id"]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    receiver = Phoenix(tmp_path_factory.mktemp("phoenix"))
    try:
        yield receiver
    finally:
        receiver.close()
