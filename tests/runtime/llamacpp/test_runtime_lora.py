"""LoRAs hot-added to the real local engine (llama.cpp) with vLLM's runtime LoRA endpoints:
a GGUF LoRA written here with the ``gguf`` package becomes a new adapter, under its
versioned name, without a restart, and leaves the base adapters' prefix caches alone
(needs the 'local' extra)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from mol.hcp.loras import content_sha256, versioned
from mol.runtime.llamacpp.supervisor import LocalEngine, LocalEngineConfig, default_model

pytestmark = [pytest.mark.local_engine, pytest.mark.slow, pytest.mark.anyio]

QUESTION = [{"role": "user", "content": "Name three colors."}]
GREEDY = {"temperature": 0, "seed": 7, "max_tokens": 16}


def write_lora(path: Path, *, rank: int = 8, scale: float = 0.1, seed: int = 0,
               shapes: dict[str, tuple[int, int]] | None = None) -> Path:
    """A GGUF LoRA as llama.cpp's convert_lora_to_gguf.py writes one: ``general.type``
    "adapter", ``adapter.type`` "lora", ``adapter.lora.alpha``, and per adapted weight
    ``W.lora_a`` (ggml shape [n_in, rank]) and ``W.lora_b`` ([rank, n_out]), here on every
    layer's attn_q and attn_v of the base (``shapes``: weight -> numpy (n_out, n_in))."""
    import gguf
    import numpy as np

    shapes = shapes or base_attention_shapes()
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(rank))
    rng = np.random.default_rng(seed)
    for weight, (n_out, n_in) in shapes.items():
        a = rng.standard_normal((rank, n_in)) * scale
        b = rng.standard_normal((n_out, rank)) * scale
        writer.add_tensor(f"{weight}.lora_a", a.astype(np.float32))
        writer.add_tensor(f"{weight}.lora_b", b.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def base_attention_shapes() -> dict[str, tuple[int, int]]:
    """The base's attn_q and attn_v weights, (n_out, n_in) each, read from its GGUF."""
    import gguf

    reader = gguf.GGUFReader(str(default_model()))
    return {t.name: (int(t.shape[1]), int(t.shape[0])) for t in reader.tensors
            if t.name.endswith((".attn_q.weight", ".attn_v.weight"))}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so one engine serves every test of this module."""
    return "asyncio"


@pytest.fixture(scope="module")
async def engine(anyio_backend: str) -> AsyncIterator[LocalEngine]:
    async with LocalEngine(LocalEngineConfig(port=0), progress=None) as running:
        yield running


@pytest.fixture(scope="module")
def lora(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_lora(tmp_path_factory.mktemp("loras") / "l4.gguf")


@pytest.fixture
async def client(engine: LocalEngine) -> AsyncIterator[httpx.AsyncClient]:
    """The engine's ROOT (``api_base`` without ``/v1``), as the LoRA dialects address it."""
    async with httpx.AsyncClient(base_url=engine.base_url.removesuffix("/v1"),
                                 timeout=60) as http:
        yield http


async def load(client: httpx.AsyncClient, name: str, path: Path | str) -> httpx.Response:
    return await client.post("/v1/load_lora_adapter",
                             json={"lora_name": name, "lora_path": str(path)})


async def unload(client: httpx.AsyncClient, name: str) -> httpx.Response:
    return await client.post("/v1/unload_lora_adapter", json={"lora_name": name})


async def chat(client: httpx.AsyncClient, model: str, messages: list[dict[str, Any]],
               **params: Any) -> dict[str, Any]:
    with anyio.fail_after(60):
        answer = await client.post("/v1/chat/completions",
                                   json={"model": model, "messages": messages, **params})
    assert answer.status_code == 200, answer.text
    return answer.json()


async def models(client: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    return {entry["id"]: entry for entry in (await client.get("/v1/models")).json()["data"]}


async def test_a_lora_loaded_at_runtime_is_a_new_adapter_without_a_restart(
        engine: LocalEngine, client: httpx.AsyncClient, lora: Path) -> None:
    name = versioned("L4", content_sha256(lora))
    pid = engine.pid
    base = await chat(client, "L1", QUESTION, **GREEDY)  # L1: the same chat format as a LoRA's

    added = await load(client, name, lora)
    assert (added.status_code, added.text) == (
        200, f"Success: LoRA adapter '{name}' added successfully.")
    listed = await models(client)
    assert listed[name] == {**listed[name], "object": "model", "root": str(lora),
                            "parent": "L0", "max_model_len": 4096}
    assert (listed["L0"]["parent"], listed["L0"]["root"]) == (None, str(default_model()))
    tuned = await chat(client, name, QUESTION, **GREEDY)
    assert tuned["model"] == name
    assert tuned["choices"][0]["message"]["content"] != base["choices"][0]["message"]["content"]
    assert (engine.pid, engine._process.returncode) == (pid, None)  # the same server, running

    again = await load(client, name, lora)
    assert again.status_code == 400
    assert again.json()["error"]["message"] == f"The lora adapter '{name}' has already been loaded."

    removed = await unload(client, name)
    assert (removed.status_code, removed.text) == (
        200, f"Success: LoRA adapter '{name}' removed successfully.")
    assert name not in await models(client)
    gone = await client.post("/v1/chat/completions", json={"model": name, "messages": QUESTION})
    assert gone.status_code == 404  # never answered by another adapter
    assert gone.json()["error"]["message"] == f"The model `{name}` does not exist."
    assert engine.pid == pid


async def test_a_file_that_is_not_a_lora_of_the_base_is_refused_and_nothing_changes(
        client: httpx.AsyncClient, tmp_path: Path) -> None:
    before = await models(client)
    missing = await load(client, "X@1", tmp_path / "nowhere.gguf")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == (
        f"Loading lora X@1 failed: No adapter found for {tmp_path / 'nowhere.gguf'}")
    text = tmp_path / "notes.gguf"
    text.write_text("not a GGUF file")
    assert (await load(client, "X@2", text)).status_code == 400
    other_base = write_lora(tmp_path / "other.gguf", shapes={"blk.0.attn_q.weight": (576, 100)})
    refused = await load(client, "X@3", other_base)
    assert refused.status_code == 400
    assert "is not a GGUF LoRA of this engine's base model" in refused.json()["error"]["message"]
    whole_model = await load(client, "X@4", default_model())
    assert whole_model.status_code == 400
    assert await models(client) == before
    assert (await chat(client, "L0", QUESTION, max_tokens=4))["choices"]


async def test_only_runtime_loras_unload(client: httpx.AsyncClient) -> None:
    configured = await unload(client, "L2")
    assert configured.status_code == 400
    assert "only LoRAs added by /v1/load_lora_adapter" in configured.json()["error"]["message"]
    unknown = await unload(client, "L9@000000000000")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["message"] == (
        "The lora adapter 'L9@000000000000' cannot be found.")
    assert (await client.post("/v1/load_lora_adapter", json={"lora_name": "x"})).status_code == 400
    assert "L2" in await models(client)


def session(n: int) -> list[dict[str, Any]]:
    """A conversation whose first turn differs from session ``m``'s in one digit only: the same
    number of tokens, and an answer the model would not write, so the second request reuses
    exactly the first request's prompt."""
    system = (f"Session {n}. You are a careful assistant who answers in plain words. " * 12)
    return [{"role": "system", "content": system},
            {"role": "user", "content": "Tell me about the weather where you are."}]


def follow_up(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [*messages, {"role": "assistant", "content": "Zq: overcast, xylophone calm."},
            {"role": "user", "content": "And tomorrow?"}]


async def second_request(client: httpx.AsyncClient, n: int, between: Any) -> dict[str, Any]:
    """L3's timings for the request that extends its previous one, ``between`` run in
    between."""
    await chat(client, "L3", session(n), max_tokens=4, temperature=0)
    await between()
    answer = await chat(client, "L3", follow_up(session(n)), max_tokens=4, temperature=0)
    return {"prompt_tokens": answer["usage"]["prompt_tokens"],
            "cached_tokens": answer["usage"]["prompt_tokens_details"]["cached_tokens"],
            "prompt_n": answer["timings"]["prompt_n"]}


async def test_a_hot_added_lora_leaves_the_base_adapters_prefix_caches_alone(
        client: httpx.AsyncClient, tmp_path: Path, lora: Path) -> None:
    """Measured: the tokens llama.cpp evaluates for a base adapter's second request are the
    same whether or not a LoRA was loaded and used in between (each LoRA is its own context)."""
    name = versioned("L4", content_sha256(lora))

    async def nothing() -> None:
        pass

    async def hot_add_and_use() -> None:
        assert (await load(client, name, lora)).status_code == 200
        assert (await chat(client, name, session(9), max_tokens=4))["choices"]

    before = await second_request(client, 1, nothing)
    after = await second_request(client, 2, hot_add_and_use)
    print(f"\nL3's second request (of {before['prompt_tokens']} prompt tokens) evaluated "
          f"{before['prompt_n']} without a hot-added LoRA, {after['prompt_n']} with one loaded "
          f"and used in between (cached {before['cached_tokens']} / {after['cached_tokens']})")
    assert after == before
    assert before["prompt_n"] < 40 < before["prompt_tokens"] - 100  # it did reuse the prefix
    assert (await unload(client, name)).status_code == 200


async def test_a_load_during_a_stream_ends_before_it_and_leaves_it_whole(
        client: httpx.AsyncClient, tmp_path: Path) -> None:
    """The new context is built in a worker thread while the stream goes on (the load does not
    wait for the running request), and the stream says what the same request says on another
    base adapter."""
    extra = write_lora(tmp_path / "l5.gguf", seed=5)
    name = versioned("L5", content_sha256(extra))
    question = [{"role": "user", "content": "Write two sentences about rivers."}]
    expected = await chat(client, "L0", question, max_tokens=48, temperature=0)
    pieces: list[str] = []
    loaded: list[int] = []

    async def load_now() -> None:
        assert (await load(client, name, extra)).status_code == 200
        loaded.append(len(pieces))  # how far the stream had got

    async with anyio.create_task_group() as tasks:
        async with client.stream("POST", "/v1/chat/completions", json={
                "model": "L3", "messages": question, "max_tokens": 48, "temperature": 0,
                "stream": True}) as stream:
            async for line in stream.aiter_lines():
                if line.startswith("data: {"):
                    if not pieces:
                        tasks.start_soon(load_now)  # once the stream is going
                    chunk = httpx.Response(200, content=line[6:]).json()
                    pieces += [c["delta"].get("content") or "" for c in chunk["choices"]]
            streamed = len(pieces)
    print(f"\nthe load answered after {loaded} of {streamed} chunks")
    assert loaded and loaded[0] < streamed
    assert "".join(pieces) == expected["choices"][0]["message"]["content"]
    assert name in await models(client)
    assert (await unload(client, name)).status_code == 200


async def test_mol_adapters_registers_a_lora_into_the_running_local_engine(
        engine: LocalEngine, client: httpx.AsyncClient, tmp_path: Path) -> None:
    # The artifact's way in: lora_api = "llamacpp" is vLLM's dialect on the local engine.
    from mol.cli.main import main

    weights = write_lora(tmp_path / "writer.gguf", seed=3)
    hcp = tmp_path / "a.toml"
    hcp.write_text('schema_version = 2\nname = "local-loras"\n[engine]\n'
                   'lora_api = "llamacpp"\n[router]\nprompt = "Route."\n[adapters.L0]\n'
                   '[adapters.L4]\nlora = { path = "writer.gguf" }\n')
    name = versioned("L4", content_sha256(weights))
    args = ["--hcp", str(hcp), "--engine-url", engine.base_url]
    assert await anyio.to_thread.run_sync(main, ["adapters", "register", *args]) == 0
    assert (await models(client))[name]["root"] == str(weights)
    assert await anyio.to_thread.run_sync(main, ["engine", "check", *args]) == 0
    answer = await chat(client, name, QUESTION, **GREEDY)
    assert answer["model"] == name and answer["choices"][0]["message"]["content"]
    assert await anyio.to_thread.run_sync(main, ["adapters", "unregister", *args]) == 0
    assert name not in await models(client)
