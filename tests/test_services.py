"""The service check (tests/services.py): a run whose selected tests need a service this
machine lacks stops before the first test with one line per missing service, once, also
under pytest-xdist; tests that need nothing still run. Nothing real is stopped: the runs
below point DOCKER_HOST (and MOL_GENUI_HOME) somewhere nothing answers."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import services

ROOT = Path(__file__).resolve().parents[1]

NEEDS_DOCKER = """\
import pytest

pytestmark = pytest.mark.docker


def test_in_a_sandbox():
    raise AssertionError("a test that needs Docker ran")
"""
NEEDS_NOTHING = """\
def test_arithmetic():
    assert 6 * 7 == 42
"""
NEEDS_GENUI = """\
import pytest


@pytest.mark.genui
def test_a_check():
    raise AssertionError("a test that needs the GenUI toolchain ran")
"""


@pytest.fixture
def dead_docker() -> Iterator[str]:
    """A DOCKER_HOST whose socket exists and nobody listens on (bound, never listening)."""
    folder = tempfile.mkdtemp(prefix="mol-dead-docker-")  # short: socket paths are limited
    path = os.path.join(folder, "docker.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    try:
        yield f"unix://{path}"
    finally:
        sock.close()
        os.unlink(path)
        os.rmdir(folder)


def pytest_run(tmp_path: Path, files: dict[str, str], *args: str,
               **env: str) -> subprocess.CompletedProcess:
    """``python3 -m pytest`` on throwaway test files, with this repository's settings and
    tests/conftest.py's hooks (loaded as a plugin: the files live outside tests/)."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir",
         str(tmp_path), "-p", "tests.conftest", "-p", "no:cacheprovider", "-q", *args,
         *(str(tmp_path / name) for name in files)],
        cwd=ROOT, env=environ, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_missing_docker_engine_stops_the_run_with_one_line(tmp_path, dead_docker, workers):
    done = pytest_run(tmp_path, {"test_docker.py": NEEDS_DOCKER}, "-n", workers,
                      DOCKER_HOST=dead_docker)
    output = done.stdout + done.stderr
    line = (f"Docker engine: not answering at {dead_docker}; start it, or run ./test, which "
            "installs and starts it")
    assert done.returncode == services.EXIT_CODE != 0, output
    assert output.count(line) == 1, output  # once, also with xdist's workers
    assert output.count("Docker engine:") == 1, output
    assert "Traceback" not in output and "a test that needs Docker ran" not in output, output
    assert "no tests ran" in output, output


def test_each_missing_service_has_its_line(tmp_path, dead_docker):
    done = pytest_run(tmp_path, {"test_docker.py": NEEDS_DOCKER, "test_genui.py": NEEDS_GENUI},
                      "-n", "0", DOCKER_HOST=dead_docker,
                      MOL_GENUI_HOME=str(tmp_path / "no-toolchain"))
    output = done.stdout + done.stderr
    assert done.returncode == services.EXIT_CODE, output
    lines = [line for line in output.splitlines()
             if re.match(r"(! .*: )?(Docker engine|GenUI toolchain|Sandbox image): ", line)]
    assert len(lines) == 2, output  # the engine's line stands for the image's
    assert "Docker engine: not answering" in lines[0]
    assert "GenUI toolchain:" in lines[1] and "mol genui setup" in lines[1], output
    assert "./test" in lines[1] and "Traceback" not in output, output


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_test_that_needs_no_service_still_runs(tmp_path, dead_docker, workers):
    done = pytest_run(tmp_path, {"test_plain.py": NEEDS_NOTHING}, "-n", workers,
                      DOCKER_HOST=dead_docker)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout and "Docker engine" not in done.stdout


def test_deselected_tests_need_nothing(tmp_path, dead_docker):
    done = pytest_run(tmp_path, {"test_docker.py": NEEDS_DOCKER, "test_plain.py": NEEDS_NOTHING},
                      "-n", "0", "-m", "not docker", DOCKER_HOST=dead_docker)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 1 deselected" in done.stdout


def test_collect_only_checks_nothing(tmp_path, dead_docker):
    done = pytest_run(tmp_path, {"test_docker.py": NEEDS_DOCKER}, "-n", "0", "--collect-only",
                      DOCKER_HOST=dead_docker)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 test collected" in done.stdout


def test_an_npm_package_is_checked_at_its_pinned_version(tmp_path, monkeypatch):
    monkeypatch.setenv("MOL_TEST_NPM_CACHE", str(tmp_path))
    package = tmp_path / "node_modules" / "@openai" / "codex" / "package.json"
    assert "not cached in" in services.check_npm("@openai/codex")
    package.parent.mkdir(parents=True)
    package.write_text(json.dumps({"name": "@openai/codex", "version": "0.1.0"}))
    assert "@openai/codex@0.169.0: not cached in" in services.check_npm("@openai/codex")
    package.write_text(json.dumps({"name": "@openai/codex", "version": "0.169.0"}))
    assert services.check_npm("@openai/codex") is None


def test_the_pins_agree_with_the_tests_and_the_test_command():
    """The npm packages and the sandbox image the check looks for are those the tests use
    and ./test provides."""
    from mol.sandboxes.image import DEFAULT_TAG

    script = (ROOT / "test").read_text()
    pinned = set(services.NPM)
    installs = re.findall(r'^install_npm (\S+) "([^"]+)" "([^"]+)"$', script, re.M)
    in_script = {f"{name}@{version}" for _, name, version in installs}
    in_tests = {spec for path in [ROOT / "tests" / "runtime" / "mcp" / "test_published_npm.py",
                                  ROOT / "tests" / "runtime" / "mcp" / "test_conformance.py",
                                  ROOT / "tests" / "server" / "test_codex.py",
                                  ROOT / "tests" / "server" / "test_claude_code.py",
                                  ROOT / "tests" / "acpagent" / "test_typescript_client.py"]
                for spec in re.findall(r'^[A-Z_]+ = "(@[^"]+@[^"]+)"$', path.read_text(), re.M)}
    assert pinned == in_script == in_tests
    # Each version in the prefix the check looks in (a second version beside the first).
    for prefix, name, version in installs:
        package = services.NPM[f"{name}@{version}"]
        assert prefix == (f'"${{{package.cache_env}:-$npm_cache/{package.cache_folder}}}'
                          f'{package.suffix}"')
    assert services.SANDBOX_IMAGE == DEFAULT_TAG
    assert services.SANDBOX_IMAGE in script
    assert f"phoenix_version={services.PHOENIX_VERSION}\n" in script
