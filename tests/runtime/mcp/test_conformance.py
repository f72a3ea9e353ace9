"""The official MCP conformance suite, every client scenario, against mol's client path.

``@modelcontextprotocol/conformance`` (npm, cached under ``~/.cache/mol-tests``)
starts a mock server per scenario and checks what the client did; the client
is ``conformance/driver.py`` (an HCP naming the mock server, driven through
``MCPManager``). A scenario passes when the suite exits 0 for it with
``conformance/expected-failures.yml``: the expected client failures the suite's
own baseline lists for the Python SDK, nothing else. The suite's 0.x bundles
import ``fs.globSync`` (Node 22) for their ``tier-check`` command only;
``conformance/node20.mjs`` stubs that import so the client scenarios run on
this machine's Node 20. One scenario a run, five runs at a time (the suite's
own ``--suite`` runs all of them at once, and on two cores they time out); a
scenario that fails among the others runs once more alone, as the Python SDK's
CI does, since some scenarios time the client's reconnects.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.npm("@modelcontextprotocol/conformance")]

PACKAGE = "@modelcontextprotocol/conformance@0.2.0-alpha.11"
CACHE = Path(os.environ.get("MOL_TEST_CONFORMANCE_CACHE",
                            Path.home() / ".cache" / "mol-tests" / "conformance"))
HERE = Path(__file__).parent / "conformance"
SCENARIOS = [
    "initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry",
    "request-metadata", "auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2",
    "auth/metadata-var3", "auth/basic-cimd", "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported", "auth/scope-omitted-when-undefined", "auth/scope-step-up",
    "auth/scope-retry-limit", "auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none", "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat", "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch", "auth/offline-access-scope", "auth/offline-access-not-supported",
    "auth/authorization-server-migration", "auth/iss-supported", "auth/iss-not-advertised",
    "auth/iss-supported-missing", "auth/iss-wrong-issuer", "auth/iss-unexpected",
    "auth/iss-normalized", "auth/metadata-issuer-mismatch", "auth/client-credentials-jwt",
    "auth/client-credentials-basic", "auth/enterprise-managed-authorization", "auth/dpop",
    "auth/dpop-nonce", "auth/wif-jwt-bearer", "sep-2322-client-request-state",
    "http-standard-headers", "http-custom-headers", "http-invalid-tool-headers",
    "json-schema-ref-no-deref", "json-schema-2020-12-preservation",
]
"""Every client scenario of the pinned suite (``test_every_client_scenario_is_run`` checks)."""


@pytest.fixture(scope="module")
def suite() -> list[str]:
    """The command that runs the suite, installed from npm once per machine."""
    entry = CACHE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    if not entry.exists():
        assert shutil.which("npm"), "npm is needed to install the conformance suite"
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix",
                        str(CACHE), PACKAGE], check=True, capture_output=True, timeout=600)
    return ["node", "--import", str(HERE / "node20.mjs"), str(entry)]


def test_every_client_scenario_is_run(suite):
    listed = subprocess.run([*suite, "list", "--client"], capture_output=True, text=True,
                            check=True, timeout=60).stdout
    names = [line.split()[1] for line in listed.splitlines() if line.startswith("  - ")]
    assert names == SCENARIOS


def run_scenario(suite: list[str], scenario: str, folder: Path) -> subprocess.CompletedProcess:
    """The suite's verdict on mol for one scenario (exit 0: passed, or failed as expected)."""
    folder.mkdir(parents=True, exist_ok=True)
    command = f"{sys.executable} {HERE / 'driver.py'}"
    return subprocess.run(
        [*suite, "client", "--command", command, "--scenario", scenario, "--timeout", "90000",
         "--expected-failures", str(HERE / "expected-failures.yml"), "-o", str(folder)],
        capture_output=True, text=True, timeout=300, cwd=folder,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})


@pytest.fixture(scope="module")
def verdicts(suite, tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """Every scenario's run, five at a time; a failure is run once more, alone."""
    root = tmp_path_factory.mktemp("conformance")
    with ThreadPoolExecutor(max_workers=5) as pool:
        runs = {name: pool.submit(run_scenario, suite, name, root / name.replace("/", "_"))
                for name in SCENARIOS}
        results = {name: run.result() for name, run in runs.items()}
    for name, run in results.items():
        if run.returncode != 0:
            results[name] = run_scenario(suite, name, root / (name.replace("/", "_") + "-alone"))
    return results


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_client_scenario(verdicts, scenario):
    run = verdicts[scenario]
    assert run.returncode == 0, f"{scenario} failed:\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
