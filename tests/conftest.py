"""Shared fixtures. (Kept out of the repository root so pytest never imports
the code folders by their bare names.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


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
