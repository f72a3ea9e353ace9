"""The official MCP conformance suite, every client scenario of two versions, against mol.

``@modelcontextprotocol/conformance`` (npm, cached under ``~/.cache/mol-tests``) starts a
mock server per scenario and checks what the client did. Two versions are pinned: the
current alpha (``ALPHA``), which the Python SDK's CI pins and whose baseline mol's
``conformance/expected-failures.yml`` takes, and the last stable release (``STABLE``, its
scenarios a subset under older names, with ``conformance/expected-failures-0.1.16.yml``).

Two clients: ``conformance/driver.py`` runs every scenario through ``MCPManager`` (an HCP
naming the mock server), answering from code; ``conformance/chat.py`` runs the scenarios
that need a person (``THROUGH_CHAT``: elicitation with defaults, OAuth step-up) through
``mol chat`` on a pseudo-terminal, a person pressing Enter or opening the URL. A scenario
passes when the suite exits 0 for it with the version's expected failures: for the alpha,
exactly those the suite's own baseline lists for the Python SDK (whose OAuth client mol
uses); for the stable release, one scenario whose mock the SDK rightly refuses (its file
says why).

The suite's bundles import ``fs.globSync`` (Node 22) for their ``tier-check`` command
only; ``conformance/node20.mjs`` stubs that import so the client scenarios run on this
machine's Node 20. One scenario a run, five runs at a time (the suite's own ``--suite``
runs all of them at once, and on two cores they time out); a scenario that fails among
the others runs once more alone, as the Python SDK's CI does, since some scenarios time
the client's reconnects.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import NPM

ALPHA = "@modelcontextprotocol/conformance@0.2.0-alpha.11"
STABLE = "@modelcontextprotocol/conformance@0.1.16"
HERE = Path(__file__).parent / "conformance"
CLIENTS = {"driver": HERE / "driver.py", "mol chat": HERE / "chat.py"}
THROUGH_CHAT = ("elicitation-sep1034-client-defaults", "auth/scope-step-up")
"""Scenarios run through ``mol chat`` too: what a person answers (a form's defaults, a
sign-in for a wider scope) is only answered end to end there."""


@dataclass(frozen=True)
class Suite:
    """One pinned version of the suite: its client scenarios and expected failures."""

    package: str
    scenarios: tuple[str, ...]
    """Every client scenario it lists (``test_every_client_scenario_is_run`` checks)."""
    expected: Path

    @property
    def entry(self) -> Path:
        return (NPM[self.package].prefix() / "node_modules" / "@modelcontextprotocol" /
                "conformance" / "dist" / "index.js")

    def command(self) -> list[str]:
        """The command that runs the suite, installed from npm once per machine."""
        if not self.entry.exists():
            assert shutil.which("npm"), "npm is needed to install the conformance suite"
            prefix = NPM[self.package].prefix()
            prefix.mkdir(parents=True, exist_ok=True)
            subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix",
                            str(prefix), self.package], check=True, capture_output=True,
                           timeout=600)
        return ["node", "--import", str(HERE / "node20.mjs"), str(self.entry)]


SUITES = {
    ALPHA: Suite(ALPHA, (
        "initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry",
        "request-metadata", "auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2",
        "auth/metadata-var3", "auth/basic-cimd", "auth/scope-from-www-authenticate",
        "auth/scope-from-scopes-supported", "auth/scope-omitted-when-undefined",
        "auth/scope-step-up", "auth/scope-retry-limit", "auth/token-endpoint-auth-basic",
        "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
        "auth/pre-registration", "auth/2025-03-26-oauth-metadata-backcompat",
        "auth/2025-03-26-oauth-endpoint-fallback", "auth/resource-mismatch",
        "auth/offline-access-scope", "auth/offline-access-not-supported",
        "auth/authorization-server-migration", "auth/iss-supported", "auth/iss-not-advertised",
        "auth/iss-supported-missing", "auth/iss-wrong-issuer", "auth/iss-unexpected",
        "auth/iss-normalized", "auth/metadata-issuer-mismatch", "auth/client-credentials-jwt",
        "auth/client-credentials-basic", "auth/enterprise-managed-authorization", "auth/dpop",
        "auth/dpop-nonce", "auth/wif-jwt-bearer", "sep-2322-client-request-state",
        "http-standard-headers", "http-custom-headers", "http-invalid-tool-headers",
        "json-schema-ref-no-deref", "json-schema-2020-12-preservation",
    ), HERE / "expected-failures.yml"),
    STABLE: Suite(STABLE, (
        "initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry",
        "auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2",
        "auth/metadata-var3", "auth/basic-cimd", "auth/scope-from-www-authenticate",
        "auth/scope-from-scopes-supported", "auth/scope-omitted-when-undefined",
        "auth/scope-step-up", "auth/scope-retry-limit", "auth/token-endpoint-auth-basic",
        "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
        "auth/pre-registration", "auth/2025-03-26-oauth-metadata-backcompat",
        "auth/2025-03-26-oauth-endpoint-fallback", "auth/resource-mismatch",
        "auth/offline-access-scope", "auth/offline-access-not-supported",
        "auth/client-credentials-jwt", "auth/client-credentials-basic",
        "auth/cross-app-access-complete-flow",
    ), HERE / "expected-failures-0.1.16.yml"),
}


def _version(package: str) -> str:
    return package.rpartition("@")[2]


RUNS = [pytest.param(package, client, scenario, marks=pytest.mark.npm(package),
                     id=f"{_version(package)}-{client.replace(' ', '_')}-{scenario}")
        for package, suite in SUITES.items()
        for client in CLIENTS for scenario in suite.scenarios
        if client == "driver" or scenario in THROUGH_CHAT]

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("package", [pytest.param(p, marks=pytest.mark.npm(p)) for p in SUITES])
def test_every_client_scenario_is_run(package):
    suite = SUITES[package]
    listed = subprocess.run([*suite.command(), "list", "--client"], capture_output=True,
                            text=True, check=True, timeout=60).stdout
    names = [line.split()[1] for line in listed.splitlines() if line.startswith("  - ")]
    assert tuple(names) == suite.scenarios


def run_scenario(suite: Suite, client: str, scenario: str,
                 folder: Path) -> subprocess.CompletedProcess:
    """The suite's verdict on mol for one scenario (exit 0: passed, or failed as expected)."""
    folder.mkdir(parents=True, exist_ok=True)
    command = f"{sys.executable} {CLIENTS[client]}"
    return subprocess.run(
        [*suite.command(), "client", "--command", command, "--scenario", scenario,
         "--timeout", "90000", "--expected-failures", str(suite.expected), "-o", str(folder)],
        capture_output=True, text=True, timeout=300, cwd=folder,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})


class Verdicts:
    """Every run of one suite version, made when a test first asks for one of them: five at
    a time; a failure is run once more, alone."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.done: dict[str, dict[tuple[str, str], subprocess.CompletedProcess]] = {}

    def of(self, package: str, client: str, scenario: str) -> subprocess.CompletedProcess:
        if package not in self.done:
            self.done[package] = self._run_all(package)
        return self.done[package][client, scenario]

    def _run_all(self, package: str) -> dict[tuple[str, str], subprocess.CompletedProcess]:
        suite = SUITES[package]
        runs = [(client, scenario) for p, client, scenario in (r.values for r in RUNS)
                if p == package]

        def folder(client: str, scenario: str, suffix: str = "") -> Path:
            name = f"{_version(package)}-{client}-{scenario}{suffix}"
            return self.root / name.replace("/", "_").replace(" ", "_")

        with ThreadPoolExecutor(max_workers=5) as pool:
            started = {run: pool.submit(run_scenario, suite, *run, folder(*run))
                       for run in runs}
            results = {run: future.result() for run, future in started.items()}
        for run, result in results.items():
            if result.returncode != 0:
                results[run] = run_scenario(suite, *run, folder(*run, "-alone"))
        return results


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory) -> Verdicts:
    return Verdicts(tmp_path_factory.mktemp("conformance"))


@pytest.mark.parametrize(("package", "client", "scenario"), RUNS)
def test_client_scenario(verdicts, package, client, scenario):
    run = verdicts.of(package, client, scenario)
    assert run.returncode == 0, (f"{scenario} ({client}, {package}) failed:\n"
                                 f"{run.stdout[-6000:]}\n{run.stderr[-2000:]}")
