"""Shared fixtures. (Kept out of the repository root so pytest never imports
the code folders by their bare names.)"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from . import services
from .services import CHROMIUM as CHROMIUM  # Debian's chromium, the only browser driven

BROWSER_DRIVER = Path(__file__).parent / "genui" / "browser.mjs"


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, the controller's side of the service check (tests/services.py)."""
    services.configure(config)


def pytest_itemcollected(item: pytest.Item) -> None:
    """A test using a fixture that needs a service gets its marker (``postgres_url``:
    ``postgres``; see ``services.FIXTURE_MARKERS``), before ``-m`` selects."""
    services.mark_by_fixtures(item)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Once the tests are selected: if they need a service this machine lacks (Docker, the
    sandbox image, PostgreSQL, chromium, the GenUI toolchain, npm packages, the ray or
    local extra), stop before the first one with one line per missing service.

    The files with slow tests go first, those on the local engine (CPU-bound) before the
    others, then the files with more tests: the workers take a file at a time in this order
    (pyproject's --no-loadscope-reorder; xdist would order by size alone), and a long file
    taken last (the local engine's forty turns) would run alone at the end."""
    weight: dict[Any, int] = {}
    size: dict[Any, int] = {}
    for item in items:
        size[item.path] = size.get(item.path, 0) + 1
        if item.get_closest_marker("slow"):
            heavier = 2 if item.get_closest_marker("local_engine") else 1
            weight[item.path] = max(weight.get(item.path, 0), heavier)
    # Stable: each file's own order is kept.
    items.sort(key=lambda item: (-weight.get(item.path, 0), -size[item.path]))
    services.after_collection(config, items)


@pytest.fixture
def anyio_backend():
    """Async tests run on asyncio, the loop uvicorn and litellm use."""
    return "asyncio"


def hcp_text(*sections: str, name: str = "test", router_prompt: str = "Route the turn.") -> str:
    """The smallest valid HCP TOML (schema version, name, router prompt), then ``sections``
    (TOML tables as text) in order. Every test that needs an artifact starts from it."""
    head = f'schema_version = 1\nname = "{name}"\n[router]\nprompt = "{router_prompt}"\n'
    return head + "".join(section if section.endswith("\n") else section + "\n"
                          for section in sections)


@pytest.fixture
def minimal_hcp(tmp_path: Path) -> Callable[..., Path]:
    """``minimal_hcp(*sections, **options)`` writes ``hcp_text(...)`` to ``tmp_path/mol.toml``
    and returns its path."""

    def write(*sections: str, **options: str) -> Path:
        path = tmp_path / "mol.toml"
        path.write_text(hcp_text(*sections, **options), encoding="utf-8")
        return path

    return write


def browse(chain: Any, tmp_path: Path, url: str, shot: str,
           **plan: Any) -> dict[str, Any]:
    """Open ``url`` in headless chromium, saving a screenshot as ``tmp_path/shot``; what the
    page showed (``tests/genui/browser.mjs`` documents the plan and the answer); ``chain`` is
    the GenUI toolchain, whose playwright-core drives the browser."""
    plan = {"url": url, "screenshot": str(tmp_path / shot),
            "profile": str(tmp_path / f"profile-{shot}"), **plan}
    done = subprocess.run([chain.node, str(BROWSER_DRIVER),
                           str(chain.home), json.dumps(plan)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)

@pytest.fixture(scope="session")
def postgres_cluster():
    """One throwaway PostgreSQL server for the whole run (see tests/pgcluster.py)."""
    from .pgcluster import PostgresCluster

    cluster = PostgresCluster()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def postgres_url(postgres_cluster) -> str:
    """The URL of a fresh, empty PostgreSQL database."""
    return postgres_cluster.database()
