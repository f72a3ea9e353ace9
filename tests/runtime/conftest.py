"""Helpers for runtime tests: an artifact aimed at a scripted engine, and test plugins."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from mol.hcp.loader import Artifact, load
from mol.plugins import hookimpl
from mol.plugins.manager import PluginManager
from mol.runtime import Runtime, Session

from ..conftest import hcp_text
from ..harness_profile import IDENTITY as IDENTITY  # the reference-style profile's
from ..harness_profile import ROUTE_TEXT as ROUTE_TEXT
from ..harness_profile import write_profile as write_profile

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

BASE_HCP = hcp_text("""\
[engine]
api_base = "http://127.0.0.1:9/v1"
model_prefix = "hosted_vllm/"
routing_constraint = "{constraint}"
timeout_sec = {timeout}
max_retries = 0
[adapters.L0]
prompt = "You chat."
[adapters.L1]
prompt = "You act."
tools.allow = ["echo", "add"]
[adapters.L2]
prompt = "You code."
tools.allow = ["echo", "add", "secret", "fail"]
tools.ask = ["risky"]
tools.deny = ["secret"]
[adapters.L3]
prompt = "You draw."
""")


class ToyTools:
    """A plugin with small tools, registered as typed functions."""

    @hookimpl
    def mol_register_tools(self, register: Any) -> None:
        def echo(text: str) -> str:
            """Echo the text back in capitals."""
            return text.upper()

        async def add(a: int, b: int = 1) -> int:
            """Add two integers.

            Args:
                a: the first number
                b: the second number
            """
            return a + b

        def secret() -> str:
            """Reveal a secret (denied by policy)."""
            return "the secret"

        def fail(reason: str) -> str:
            """Always fails."""
            raise RuntimeError(reason)

        def risky() -> str:
            """Needs approval."""
            return "risky ran"

        for tool in (echo, add, secret, fail, risky):
            register(tool)


def write_hcp(tmp_path: Path, constraint: str = "structured_outputs", extra: str = "",
              timeout: float = 30) -> Artifact:
    path = tmp_path / "test.toml"
    path.write_text(BASE_HCP.format(constraint=constraint, timeout=timeout) + extra)
    return load(path)


def toy_plugins(*extra: tuple[str, Any]) -> PluginManager:
    return PluginManager(None, builtin=(), extra=[("toy", ToyTools()), *extra])


RUNTIME_OPTIONS = ("plugins", "toolsets", "sandbox_pool")


def session(artifact: Artifact, engine: Any, **kwargs: Any) -> Session:
    """A session of a runtime on ``engine`` (``kwargs``: ``Runtime``'s and ``Session``'s
    options; the toy plugins by default)."""
    kwargs.setdefault("plugins", toy_plugins())
    shared = {key: kwargs.pop(key) for key in RUNTIME_OPTIONS if key in kwargs}
    return Runtime(artifact, engine_url=engine.base_url, **shared).session(**kwargs)


def bodies(engine: Any, adapter: str | None = None) -> list[dict[str, Any]]:
    records = engine.requests if adapter is None else engine.requests_for(adapter)
    return [r["body"] for r in records]


def is_route(body: dict[str, Any]) -> bool:
    return body["messages"][0]["content"] == "Route the turn."


@pytest.fixture
def hcp(tmp_path: Path) -> Artifact:
    return write_hcp(tmp_path)
