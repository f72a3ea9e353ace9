"""Shared fixtures. (Kept out of the repository root so pytest never imports
the code folders by their bare names.)"""

import pytest


@pytest.fixture
def anyio_backend():
    """Async tests run on asyncio, the loop uvicorn and litellm use."""
    return "asyncio"
