"""Harbor's ATIF models (``harbor.models.trajectories``), from the pinned harbor wheel.

The ``harbor`` package needs Python 3.12, so it is never installed here: ``./test``
downloads its wheel (``pip download --no-deps --python-version 3.12 --only-binary=:all:
harbor==VERSION``) into ``~/.cache/mol-tests/harbor`` ($MOL_TEST_HARBOR_CACHE), and
``trajectory_model()`` unpacks only ``harbor/models/trajectories`` (pydantic models that
import under 3.11) beside empty ``harbor`` and ``harbor.models`` packages (the real
``harbor/__init__.py`` asks for the installed distribution's version) and imports them.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

VERSION = "0.26.0"
"""The harbor release whose ATIF models the exports are checked against (./test pins it)."""
MODELS = "harbor/models/trajectories/"


def cache() -> Path:
    """Where ./test puts the wheel."""
    default = Path.home() / ".cache" / "mol-tests" / "harbor"
    return Path(os.environ.get("MOL_TEST_HARBOR_CACHE") or default)


def wheel() -> Path:
    """The pinned wheel (it may be missing: ``tests/services.py`` checks first)."""
    return cache() / f"harbor-{VERSION}-py3-none-any.whl"


def trajectory_model() -> Any:
    """Harbor's ``Trajectory`` pydantic model (importing ``harbor.models.trajectories``)."""
    if "harbor.models.trajectories" not in sys.modules:
        root = cache() / f"models-{VERSION}"
        if not root.is_dir():
            _unpack(root)
        sys.path.insert(0, str(root))
    return importlib.import_module("harbor.models.trajectories").Trajectory


def _unpack(root: Path) -> None:
    """Unpack the models into a folder of its own, then rename it to ``root``: test workers
    unpacking at once never import a half-written package."""
    folder = Path(tempfile.mkdtemp(prefix="models-", dir=root.parent))
    with zipfile.ZipFile(wheel()) as archive:
        for name in archive.namelist():
            if name.startswith(MODELS) and name.endswith(".py"):
                archive.extract(name, folder)
    for package in ("harbor", "harbor/models"):
        (folder / package / "__init__.py").touch()
    try:
        folder.rename(root)
    except OSError:  # another worker's is there already
        shutil.rmtree(folder)
