"""Shared pieces of the GenUI tests: the toolchain, the sample UIs, A2UI message builders,
and the browser driver (headless Debian chromium through playwright-core)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mol.genui import toolchain
from mol.genui.a2ui.schemas import load

from ..conftest import CHROMIUM, browse, hcp_text

__all__ = ["CHROMIUM", "browse", "hcp_text"]

DATA = Path(__file__).parent / "data"
BASIC = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"


@pytest.fixture(scope="session")
def chain() -> toolchain.Toolchain:
    """The installed toolchain (``mol genui setup``; CI runs it before the tests)."""
    return toolchain.find()


@pytest.fixture(scope="session")
def schemas(chain: toolchain.Toolchain) -> Any:
    return load(chain.a2ui_schemas(), chain.a2ui_renderer())


def create(surface: str = "s", catalog: str = BASIC) -> dict[str, Any]:
    return {"version": "v0.9", "createSurface": {"surfaceId": surface, "catalogId": catalog}}


def components(*items: dict[str, Any], surface: str = "s") -> dict[str, Any]:
    return {"version": "v0.9", "updateComponents": {"surfaceId": surface,
                                                    "components": list(items)}}


def data(value: Any, path: str = "/", surface: str = "s") -> dict[str, Any]:
    return {"version": "v0.9", "updateDataModel": {"surfaceId": surface, "path": path,
                                                   "value": value}}


def lines(*messages: dict[str, Any]) -> str:
    """A2UI messages as JSON lines."""
    return "\n".join(json.dumps(m) for m in messages) + "\n"
