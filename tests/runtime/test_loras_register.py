"""Registering an artifact's LoRAs with a running engine (mol.runtime.engine.loras and
registration), against the scripted engine speaking vLLM's and SGLang's LoRA dialects."""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path

import anyio
import httpx
import pytest

from mol.core.errors import EngineResponseError, UsageError
from mol.hcp.loader import load
from mol.runtime import (
    LoraClient,
    lora_client,
    register_loras,
    register_missing,
    survey_loras,
    unregister_loras,
)
from mol.runtime.testing import ScriptedEngine

pytestmark = pytest.mark.anyio

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L2"
[[L2]]
times = -1
reply = "coded"
[[L0]]
constrained = false
times = -1
reply = "summary"
"""

HCP = """\
schema_version = 2
name = "loras"
[engine]
api_base = "http://127.0.0.1:9/v1"
lora_api = "{api}"
timeout_sec = 10
max_retries = 0
[router]
prompt = "Route."
[adapters.L0]
prompt = "You chat."
[adapters.L2]
prompt = "You code."
lora = {{ path = "{path}" }}
"""

LOAD = {"vllm": "/v1/load_lora_adapter", "sglang": "/load_lora_adapter"}
UNLOAD = {"vllm": "/v1/unload_lora_adapter", "sglang": "/unload_lora_adapter"}


def artifact(folder: Path, api: str = "vllm", path: str = "l2", weights: bytes = b"w1"):
    lora = folder / "l2"
    lora.mkdir(exist_ok=True)
    (lora / "adapter_config.json").write_text('{"r": 8}')
    (lora / "adapter_model.safetensors").write_bytes(weights)
    (folder / "a.toml").write_text(HCP.format(api=api, path=path))
    return load(folder / "a.toml")


@pytest.mark.parametrize("api", ["vllm", "sglang"])
async def test_each_dialect_gets_its_exact_request_under_the_versioned_name(tmp_path, api):
    art = artifact(tmp_path, api)
    name = art.doc.engine_name("L2")
    assert name.startswith("L2@") and len(name) == 15
    async with ScriptedEngine(SCRIPT, lora_api=api) as engine:
        assert await register_missing(art, engine.base_url) == [name]
        (request,) = engine.lora_requests
        assert request["path"] == LOAD[api]
        assert request["body"] == {"lora_name": name, "lora_path": str(tmp_path / "l2")}
        assert engine.loaded_loras == {name: str(tmp_path / "l2")}
        # Present: left alone, never reloaded in place.
        assert await register_missing(art, engine.base_url) == []
        assert len(engine.lora_requests) == 1
        served = await LoraClient(engine.base_url, api).served()
        (card,) = [m for m in served if m.id == name]
        assert (card.root, card.parent) == (str(tmp_path / "l2"), "scripted-base")
        await unregister_loras(art, lora_client(art, engine.base_url), ["L2"])
        assert engine.lora_requests[-1]["path"] == UNLOAD[api]
        assert engine.lora_requests[-1]["body"] == {"lora_name": name}
        assert engine.loaded_loras == {}


async def test_vllm_without_runtime_updating_is_a_clear_error(tmp_path):
    art = artifact(tmp_path)
    async with ScriptedEngine(SCRIPT, lora_api="vllm", runtime_lora_updating=False) as engine:
        with pytest.raises(EngineResponseError) as caught:
            await register_missing(art, engine.base_url)
        async with httpx.AsyncClient() as http:  # no such route: FastAPI's 404, as vLLM's
            raw = await http.post(f"{engine.base_url}/load_lora_adapter", json={})
    assert (raw.status_code, raw.json()) == (404, {"detail": "Not Found"})
    assert str(caught.value) == (
        f"the engine refused {art.doc.engine_name('L2')}: runtime LoRA updating is off: start "
        "vLLM with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True")
    assert caught.value.status == 404


@pytest.mark.parametrize(("api", "status", "words"), [
    ("vllm", 404, "Loading lora {name} failed: No adapter found for /no/such/l2"),
    ("sglang", 400, "Repo id must be in the form 'repo_name' or 'namespace/repo_name': "
                    "'/no/such/l2'"),
])
async def test_an_unknown_path_is_the_engines_not_found_error(tmp_path, api, status, words):
    sha = "ab" * 32
    (tmp_path / "a.toml").write_text(HCP.format(api=api, path="/no/such/l2").replace(
        'path = "/no/such/l2"', f'path = "/no/such/l2", sha256 = "{sha}"'))
    art = load(tmp_path / "a.toml")
    name = art.doc.engine_name("L2")
    assert name == "L2@abababababab"
    async with ScriptedEngine(SCRIPT, lora_api=api) as engine:
        with pytest.raises(EngineResponseError) as caught:
            await register_missing(art, engine.base_url)
    assert str(caught.value).startswith(f"the engine refused {name}: "
                                        + words.format(name=name))
    assert caught.value.status == status


@pytest.mark.parametrize(("api", "words"), [
    ("vllm", "The lora adapter '{name}' has already been loaded. If you want to load the "
             "adapter in place, set 'load_inplace' to True."),
    ("sglang", "Failed to load LoRA adapter {name} because it is already loaded"),
])
async def test_a_duplicate_name_and_unloading_an_unknown_one_are_refused(tmp_path, api, words):
    art = artifact(tmp_path, api)
    name = art.doc.engine_name("L2")
    async with ScriptedEngine(SCRIPT, lora_api=api) as engine:
        client = LoraClient(engine.base_url, api)
        await client.load(name, str(tmp_path / "l2"))
        with pytest.raises(EngineResponseError) as duplicate:
            await client.load(name, str(tmp_path / "l2"))
        await client.unload(name)
        with pytest.raises(EngineResponseError) as unknown:
            await client.unload(name)
    assert str(duplicate.value) == f"the engine refused {name}: {words.format(name=name)}"
    assert duplicate.value.status == 400
    assert str(unknown.value) == f"the engine refused {name}: " + {
        "vllm": f"The lora adapter '{name}' cannot be found.",
        "sglang": f"LoRA with name {name} does not exist. Loaded LoRAs: dict_keys([])"}[api]


async def test_registering_needs_a_lora_api(tmp_path):
    art = artifact(tmp_path, "none")
    with pytest.raises(UsageError, match="engine.lora_api is 'none'"):
        await register_missing(art, "http://127.0.0.1:9/v1")


async def test_an_unloaded_lora_is_the_engines_missing_model():
    # served: the script's adapters only (not L0-L3 besides), the models it compares
    async with ScriptedEngine(SCRIPT, lora_api="vllm", served=["L0", "L2"]) as engine:
        client = LoraClient(engine.base_url, "vllm")
        await client.load("L2@0123456789ab", "/")
        chat = {"model": "hosted_vllm/L2@0123456789ab",
                "messages": [{"role": "user", "content": "hi"}]}
        async with httpx.AsyncClient() as http:
            ok = await http.post(f"{engine.base_url}/chat/completions", json=chat)
            await client.unload("L2@0123456789ab")
            gone = await http.post(f"{engine.base_url}/chat/completions", json=chat)
    assert ok.json()["choices"][0]["message"]["content"] == "coded"  # L2's rules
    assert engine.requests[0]["model"] == "L2@0123456789ab"
    assert gone.status_code == 404
    assert gone.json()["error"]["message"] == (
        "The model `hosted_vllm/L2@0123456789ab` does not exist.")


async def test_in_use_reads_vllms_lora_gauge_while_a_request_is_in_flight(tmp_path):
    art = artifact(tmp_path)
    old = "L2@0123456789ab"
    entered = threading.Event()

    async with ScriptedEngine(SCRIPT, lora_api="vllm", latency=30,
                              on_request=lambda r: "path" not in r and entered.set()) as engine:
        client = LoraClient(engine.base_url, "vllm")
        assert await client.in_use(old) is False  # the gauge is there, with no series yet
        await client.load(old, "/")
        async with httpx.AsyncClient(timeout=60) as http:
            async with anyio.create_task_group() as group:
                group.start_soon(partial(
                    http.post, f"{engine.base_url}/chat/completions",
                    json={"model": old, "messages": [{"role": "user", "content": "x"}]}))
                await anyio.to_thread.run_sync(entered.wait, 10)
                assert await client.in_use(old) is True
                done = await unregister_loras(art, lora_client(art, engine.base_url),
                                              stale=True)
                assert done == [(old, "in use")] and old in engine.loaded_loras
                group.cancel_scope.cancel()
        with anyio.fail_after(10):
            while await client.in_use(old):  # the engine sees the client gone  # noqa: ASYNC110
                await anyio.sleep(0.01)
        assert await unregister_loras(art, lora_client(art, engine.base_url),
                                      stale=True) == [(old, "unloaded")]
        assert old not in engine.loaded_loras


async def test_sglang_says_nothing_of_requests_in_flight():
    async with ScriptedEngine(SCRIPT, lora_api="sglang") as engine:
        assert await LoraClient(engine.base_url, "sglang").in_use("L2@0123456789ab") is None


async def test_a_survey_tells_versions_and_foreign_models_apart(tmp_path):
    art = artifact(tmp_path)
    name = art.doc.engine_name("L2")
    # served: the script's adapters only (not L0-L3 besides), the models it compares
    async with ScriptedEngine(SCRIPT, lora_api="vllm", served=["L0", "L2"]) as engine:
        client = LoraClient(engine.base_url, "vllm")
        await client.load("L2@0123456789ab", "/")
        await client.load("other", "/")
        rows, others = survey_loras(art, await client.served())
        assert await register_loras(art, client) == [(name, "registered")]
        after, _ = survey_loras(art, await client.served())
    l2 = rows[1]
    assert (l2.adapter, l2.engine_name, l2.listed) == ("L2", name, False)
    assert l2.other_versions == ("L2@0123456789ab",)
    assert l2.path == str(tmp_path / "l2") and len(l2.sha256) == 64
    assert others == ["L2", "scripted-base", "other"]  # the script's own L2 is no version
    assert after[1].listed and rows[0].engine_name == "L0" and rows[0].path is None
