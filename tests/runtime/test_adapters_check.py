"""The adapter check against the engine's model list (mol.runtime.engine.adapters_check)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from mol.core.errors import EngineAdapterUnavailable, EngineConnectionError, EngineResponseError
from mol.hcp.loader import load_text
from mol.runtime import LiteLLMEngine, check_adapters, require_served
from mol.runtime.engine.adapters_check import check_listing, same_base
from mol.runtime.testing import ScriptedEngine
from mol.runtime.windows import Windows

from .conftest import hcp_text

L3 = {"id": "L3"}
SHA = "ab" * 32
OTHER = "cd" * 32


def artifact(tmp_path: Path, *sections: str):
    """L0, L1, L3 (a version-1 artifact has the seed's four) and L2 with a LoRA."""
    adapters = "".join(f'[adapters.{name}]\nprompt = "x"\n' for name in ("L0", "L1", "L3"))
    lora = f'[adapters.L2]\nprompt = "x"\nlora = {{ path = "s3://b/l2", sha256 = "{SHA}" }}\n'
    return load_text(hcp_text(adapters, lora, *sections), tmp_path)


def test_each_adapter_is_ok_or_missing_by_its_engine_name(tmp_path: Path):
    check = check_listing(artifact(tmp_path), [{"id": "L0"}, {"id": "L1@x"}, {"id": "L2"},
                                               {"id": "L3"}])
    assert [(s.adapter, s.engine_name, s.state) for s in check.states] == [
        ("L0", "L0", "ok"), ("L1", "L1", "missing"), ("L2", f"L2@{SHA[:12]}", "missing"),
        ("L3", "L3", "ok")]
    assert check.problems[0].detail == "L1 (engine name L1) is not served by the engine"
    # L2's LoRA is served under its versioned name only: the bare name may be another file
    assert check.named("missing") == ["L1", "L2"]
    assert check.problems[1].detail == (f"L2@{SHA[:12]} is not served (the engine serves L2: "
                                        "register it with mol adapters register)")
    assert check_listing(artifact(tmp_path), [{"id": "L0"}, {"id": "L1"},
                                              {"id": f"L2@{SHA[:12]}"}, L3]).problems == []


def test_another_version_of_a_lora_is_named(tmp_path: Path):
    listed = [{"id": "L0"}, {"id": "L1"}, {"id": f"L2@{OTHER[:12]}"}, L3]
    (state,) = check_listing(artifact(tmp_path), listed, "http://e/v1/models").problems
    assert state.detail == (f"L2@{SHA[:12]} is not served (the engine serves L2@{OTHER[:12]}: "
                            "register it with mol adapters register)")
    with pytest.raises(EngineAdapterUnavailable) as caught:
        check_listing(artifact(tmp_path), listed, "http://e/v1/models").raise_for_problems()
    assert str(caught.value).startswith("the engine at http://e/v1/models does not serve the "
                                        f"artifact's adapters: L2@{SHA[:12]} is not served")


def test_a_lora_on_another_base_is_foreign(tmp_path: Path):
    based = artifact(tmp_path, '[model]\nbase = "Qwen3-8B"\n')
    listed = [{"id": "Qwen/Qwen3-8B", "parent": None},
              {"id": "L0", "parent": "/models/qwen3-8b"},  # the last path component matches
              {"id": "L1", "parent": "meta-llama/Llama-3.1-8B"},
              {"id": f"L2@{SHA[:12]}", "parent": "Qwen3-8B"}, L3]
    check = check_listing(based, listed)
    assert [s.state for s in check.states] == ["ok", "foreign", "ok", "ok"]
    assert check.problems[0].detail == (
        "L1 (engine name L1) is foreign: the engine serves it on base "
        "'meta-llama/Llama-3.1-8B', not the artifact's [model] base 'Qwen3-8B'")
    # Without [model] base, or without a parent, nothing is foreign.
    assert check_listing(artifact(tmp_path), listed).named("foreign") == []
    assert check_listing(based, [{"id": "L0"}, {"id": "L1"},
                                 {"id": f"L2@{SHA[:12]}"}, L3]).problems == []


def test_same_base():
    assert same_base("Qwen/Qwen3-8B", "qwen3-8b") and same_base("qwen3-8b", "Qwen3-8B")
    assert same_base("/data/models/Qwen3-8B/", "Qwen3-8B")
    assert not same_base("Qwen/Qwen3-8B-Base", "Qwen3-8B")


def test_the_check_reads_the_engine_and_names_an_unreadable_list(tmp_path: Path):
    art = artifact(tmp_path)
    with ScriptedEngine.serve('[[L0]]\nreply = "x"\n', served=["L0", "L1", "L3"]) as engine:
        check = anyio.run(lambda: check_adapters(art, engine.base_url))
        assert check.url == f"{engine.base_url}/models" and check.named("missing") == ["L2"]
        root = engine.base_url.removesuffix("/v1")
        with pytest.raises(EngineResponseError, match=f"GET {root}/models answered HTTP 404"):
            anyio.run(lambda: check_adapters(art, root))
    with pytest.raises(EngineConnectionError,
                       match="model list GET http://127.0.0.1:9/v1/models got no answer"):
        anyio.run(lambda: check_adapters(art, "http://127.0.0.1:9/v1"))


class Counting(LiteLLMEngine):
    """The engine's model list read through ``models()``, counted."""

    asked = 0

    async def models(self):
        Counting.asked += 1
        return await super().models()


def test_the_check_serves_the_windows_one_model_list_request_in_all(tmp_path: Path):
    """A checked start reads the model list once; the runtime's windows take it from the
    check and ask no more (a one-turn ``mol run`` costs that one request)."""
    art = artifact(tmp_path)
    served = ["L0", "L1", f"L2@{SHA[:12]}", "L3"]
    with ScriptedEngine.serve('[[L0]]\nreply = "x"\n', served=served,
                              context_window=3000) as engine:
        counting = Counting(engine.base_url)
        windows = Windows(art, counting)
        assert anyio.run(require_served, art, counting, windows) is not None
        assert anyio.run(windows.of, "L1") == 3000 and Counting.asked == 0
        assert not windows.unasked("L0", 10)  # the window is known: no request is unasked
        engine.served.remove("L0")
        with pytest.raises(EngineAdapterUnavailable, match=r"L0 \(engine name L0\) is not "):
            anyio.run(require_served, art, LiteLLMEngine(engine.base_url), None)
    assert anyio.run(require_served, art, object(), None) is None  # nothing to ask over HTTP
