"""Helpers for the CLI's tests: the shared artifact text of the runtime's tests."""

from __future__ import annotations

from ..conftest import hcp_text
from ..runtime.conftest import BASE_HCP

__all__ = ["BASE_HCP", "hcp_text"]
