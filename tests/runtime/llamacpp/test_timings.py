"""What the local engine reports it evaluated for each request (llama.cpp's own counters, in
the shape of llama.cpp's server and OpenAI's usage), for real on SmolLM2-135M."""

from __future__ import annotations

import json
import uuid
from typing import Any

import anyio
import httpx
import pytest

from mol.runtime.engine.client import LiteLLMEngine
from mol.runtime.llamacpp.supervisor import LocalEngine, LocalEngineConfig

pytestmark = [pytest.mark.local_engine, pytest.mark.anyio]

TIMINGS = {"cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second",
           "predicted_n", "predicted_ms", "predicted_per_token_ms", "predicted_per_second"}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def engine(anyio_backend: str) -> Any:
    config = LocalEngineConfig(port=0, adapters=("L0", "L2"), tool_adapters=frozenset({"L2"}))
    async with LocalEngine(config, progress=None) as running:
        yield running


async def chat(engine: LocalEngine, adapter: str, messages: list[dict], **body: Any) -> dict:
    async with httpx.AsyncClient(base_url=engine.base_url, timeout=120) as client:
        with anyio.fail_after(120):
            response = await client.post("/chat/completions", json={
                "model": adapter, "messages": messages, "temperature": 0, **body})
    assert response.status_code == 200, response.text
    return response.json()


def fresh(user: str) -> list[dict]:
    """A conversation no earlier request began with (only the template's first tokens are)."""
    return [{"role": "system", "content": f"Session {uuid.uuid4().hex}. Answer briefly."},
            {"role": "user", "content": user}]


def check(answer: dict) -> tuple[int, int, int]:
    """(prompt tokens, cached, evaluated) of a one-evaluation answer, checked for agreement."""
    usage, timings = answer["usage"], answer["timings"]
    assert set(timings) == TIMINGS
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    assert cached == timings["cache_n"]
    assert timings["prompt_n"] == usage["prompt_tokens"] - cached
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    return usage["prompt_tokens"], cached, timings["prompt_n"]


async def test_a_request_extending_the_last_one_evaluates_only_what_is_new(engine):
    messages = fresh("Name three colours of the rainbow.")
    first = await chat(engine, "L0", messages, max_tokens=24)
    size, cached, evaluated = check(first)
    assert cached < 10 and evaluated > size - 10  # only the template's first tokens were known
    messages += [first["choices"][0]["message"],
                 {"role": "user", "content": "And which colour comes after green?"}]
    second = await chat(engine, "L0", messages, max_tokens=8)
    longer, cached, evaluated = check(second)
    assert cached >= size  # the whole first prompt, and some of the reply, came from the cache
    assert 0 < evaluated < longer - size + 8
    assert second["timings"]["prompt_ms"] > 0 and second["timings"]["predicted_n"] > 0


async def test_an_exact_repeat_evaluates_one_token(engine):
    """llama-cpp-python evaluates a prompt's last token again for its logits. llama.cpp counts
    a one-token batch as a generated token's and reports an empty count as 1: the prompt's
    share is still exact."""
    messages = fresh("Say yes.")
    size, _, _ = check(await chat(engine, "L0", messages, max_tokens=4))
    again = await chat(engine, "L0", messages, max_tokens=4)
    assert check(again) == (size, size - 1, 1)


async def test_a_stream_ends_with_the_timings_then_the_usage(engine):
    messages = fresh("Count from one to five.")
    first = await chat(engine, "L0", messages, max_tokens=16)
    size, _, _ = check(first)
    messages += [first["choices"][0]["message"], {"role": "user", "content": "Now six to ten."}]
    chunks = []
    async with httpx.AsyncClient(base_url=engine.base_url, timeout=120) as client, \
            client.stream("POST", "/chat/completions", json={
                "model": "L0", "messages": messages, "max_tokens": 16, "temperature": 0,
                "stream": True, "stream_options": {"include_usage": True}}) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                chunks.append(line[6:])
    assert chunks[-1] == "[DONE]"
    *answer, last, usage_chunk = [json.loads(chunk) for chunk in chunks[:-1]]
    assert all("timings" not in chunk and "usage" not in chunk for chunk in answer)
    assert last["choices"][0]["finish_reason"] and "timings" in last
    assert usage_chunk["choices"] == []
    usage, timings = usage_chunk["usage"], last["timings"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == timings["cache_n"] >= size
    assert timings["prompt_n"] == usage["prompt_tokens"] - timings["cache_n"] > 0


async def test_mol_reads_the_cached_tokens_streamed_or_not(engine):
    engine_client = LiteLLMEngine(engine.base_url, model_prefix="openai/", max_retries=0)
    messages = fresh("What is two plus two?")
    plain = await engine_client.complete("L0", messages, params={"max_tokens": 8})
    streamed = await engine_client.complete("L0", messages, params={"max_tokens": 8},
                                            on_delta=lambda delta: None)
    assert plain.usage.prompt_tokens == streamed.usage.prompt_tokens > 0
    assert plain.usage.cached_tokens is not None
    assert streamed.usage.cached_tokens == streamed.usage.prompt_tokens - 1  # a repeat


async def test_a_request_with_tools_counts_its_prompt_once_and_every_evaluation(engine):
    """The tool chat format asks the model more than once (a message or a call, then the
    message without the tools): the prompt is the request's own, tools included, and
    prompt_n counts everything evaluated."""
    messages = fresh("Say hello to me in a friendly sentence.")
    bare = await chat(engine, "L2", messages, max_tokens=24)
    answer = await chat(engine, "L2", messages, tools=[WEATHER], max_tokens=24)
    assert not answer["choices"][0]["message"].get("tool_calls")
    usage, timings = answer["usage"], answer["timings"]
    assert usage["prompt_tokens"] > bare["usage"]["prompt_tokens"] + 40  # the tools' text
    assert timings["prompt_n"] > usage["prompt_tokens"] - timings["cache_n"]
