"""Fixtures for sandbox tests: they run against the real Docker engine and the default image.

No test here skips when Docker is missing: the run stops before the first test, saying
so (the ``docker`` marker, tests/services.py); ``./test`` starts an engine and builds the
image.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from mol.hcp.schema import SandboxConfig
from mol.sandboxes.sandbox import Sandbox, open_sandbox


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so one sandbox can serve every test of a module."""
    return "asyncio"


@pytest.fixture(scope="module")
async def sandbox(anyio_backend: str) -> AsyncIterator[Sandbox]:
    """A default-settings sandbox shared by the tests of one module that do not damage it."""
    async with open_sandbox(SandboxConfig(), session_id="test-shared") as running:
        yield running


SMALL = SandboxConfig(memory="256m", pids_limit=64, tmp_size="32m", workspace_size="32m",
                      max_output_bytes=4096)
"""Tight limits, so hostile commands hit them fast."""


@pytest.fixture(scope="module")
async def small_sandbox(anyio_backend: str) -> AsyncIterator[Sandbox]:
    """A sandbox with ``SMALL`` limits, shared by one module's hostile tests."""
    async with Sandbox(SMALL, session_id="test-small") as running:
        yield running
