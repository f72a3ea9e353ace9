"""The GenUI npm toolchain: where it lives, whether it is ready, and ``mol genui setup``.

Everything the checker and the preview run comes from one cache folder,
``$MOL_GENUI_HOME`` or ``~/.cache/mol/genui``, filled once (online) by
``mol genui setup`` and used offline from then on; nothing is fetched at
check or render time. Setup installs the packages pinned by
``genui/node/package-lock.json`` with ``npm ci --ignore-scripts``, then builds
the preview's local modules (``node/build.mjs``: React, the A2UI Lit renderer,
the ``$ui4a/*`` runtime stubs) into ``assets/``, and writes what that renderer accepts
(``node/renderer.mjs``: the A2UI versions of each message type, from the package's own
message schema) into ``a2ui-renderer.json``. A stamp records the digest of
everything that went into the cache, so a mol whose pins or stubs changed
asks for ``mol genui setup`` again instead of running stale files.

This module never imports or runs anything at import time; without Node the
rest of mol works, and only a check or preview raises ``GenUISetupError``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mol.core.errors import GenUISetupError

HOME_ENV = "MOL_GENUI_HOME"
DEFAULT_HOME = "~/.cache/mol/genui"
PACKAGE = Path(__file__).resolve().parent
NODE_SOURCES = PACKAGE / "node"
"""``package.json``, ``package-lock.json`` and the Node programs (check, build)."""
STUBS = PACKAGE / "stubs"
"""The ``$ui4a/*`` modules: type declarations for the checker, JavaScript for the preview."""
SETUP_HINT = "run `mol genui setup` (needs Node 18+ and npm, online once)"
STAMP = ".mol-genui-stamp"
RENDERER = "a2ui-renderer.json"
"""The file ``node/renderer.mjs`` writes into the cache at setup."""
NPM_TIMEOUT = 900.0
"""Seconds ``npm ci`` may take (a cold cache downloads about 120 MB)."""


def home() -> Path:
    """The cache folder: ``$MOL_GENUI_HOME`` or ``~/.cache/mol/genui``."""
    return Path(os.environ.get(HOME_ENV) or DEFAULT_HOME).expanduser()


BUILD_INPUTS = ("node/package.json", "node/package-lock.json", "node/build.mjs",
                "node/a2ui-preview.js", "node/renderer.mjs", "stubs/*.js")
"""What the cache is built from; the checker's own program and the stubs' declarations are
read from the package at each check, so changing them needs no new setup."""


def digest() -> str:
    """The digest of ``BUILD_INPUTS``, recorded in the cache's stamp."""
    hasher = hashlib.sha256()
    for pattern in BUILD_INPUTS:
        for path in sorted(PACKAGE.glob(pattern)):
            hasher.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0")
            hasher.update(path.read_bytes() + b"\0")
    return hasher.hexdigest()[:32]


@dataclass(frozen=True)
class Toolchain:
    """A ready cache: Node, the installed packages and the built preview modules."""

    home: Path
    node: str
    """The ``node`` executable."""

    @property
    def modules(self) -> Path:
        """The installed npm packages."""
        return self.home / "node_modules"

    @property
    def assets(self) -> Path:
        """The preview's local modules (React, the A2UI renderer, the ``$ui4a/*`` stubs)."""
        return self.home / "assets"

    def a2ui_schemas(self) -> Path:
        """The official A2UI JSON Schemas, as ``@a2ui/web_core`` ships them
        (``v0_9/schemas``, ``v1_0/schemas``)."""
        return self.modules / "@a2ui" / "web_core" / "src"

    def a2ui_renderer(self) -> Path:
        """What the preview's A2UI renderer accepts, written at setup by ``renderer.mjs``:
        per renderer module, the ``version`` values of each message type."""
        return self.home / RENDERER

    def script(self, name: str) -> str:
        """The path of one of mol's Node programs (``check.mjs``, ``build.mjs``)."""
        return str(NODE_SOURCES / name)


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        raise GenUISetupError(f"Node.js is not on PATH; the GenUI checker needs it: {SETUP_HINT}")
    return node


def find() -> Toolchain:
    """The ready toolchain, or ``GenUISetupError`` saying how to install it."""
    root = home()
    stamp = root / STAMP
    if not stamp.is_file():
        raise GenUISetupError(f"the GenUI toolchain is not installed in {root}: {SETUP_HINT}")
    if stamp.read_text().strip() != digest():
        raise GenUISetupError(f"the GenUI toolchain in {root} was built for another version "
                              f"of mol: {SETUP_HINT}")
    return Toolchain(root, _node())


def setup(force: bool = False, say: Callable[[str], None] = print) -> Toolchain:
    """Install the pinned packages and build the preview modules (idempotent: a cache whose
    stamp matches is left as it is unless ``force``)."""
    root = home()
    if not force:
        try:
            ready = find()
        except GenUISetupError:
            pass
        else:
            say(f"the GenUI toolchain in {root} is up to date")
            return ready
    node, npm = _node(), shutil.which("npm")
    if npm is None:
        raise GenUISetupError("npm is not on PATH; `mol genui setup` installs the GenUI "
                              "toolchain with it")
    root.mkdir(parents=True, exist_ok=True)
    (root / STAMP).unlink(missing_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(NODE_SOURCES / name, root / name)
    say(f"installing the GenUI packages into {root} (npm ci)")
    _run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
         root, "npm ci")
    chain = Toolchain(root, node)
    say("building the preview modules")
    _run([node, chain.script("build.mjs"), str(root), str(STUBS)], root, "the preview build")
    _run([node, chain.script("renderer.mjs"), str(root)], root, "reading the A2UI renderer")
    (root / STAMP).write_text(digest() + "\n")
    say(f"the GenUI toolchain is ready in {root}")
    return chain


def _run(command: list[str], cwd: Path, what: str) -> None:
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True,
                              timeout=NPM_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise GenUISetupError(f"{what} did not finish within {NPM_TIMEOUT:.0f} s") from None
    except OSError as exc:
        raise GenUISetupError(f"{what} could not start: {exc}") from None
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise GenUISetupError(f"{what} failed (exit {done.returncode}):\n{tail}")
