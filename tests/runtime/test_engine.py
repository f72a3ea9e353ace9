"""The engine boundary: litellm's failures mapped by type, everything else untouched."""

from __future__ import annotations

import pytest

from mol.core.errors import (
    EngineAdapterUnavailable,
    EngineContextLength,
    EngineProtocolError,
    EngineResponseError,
    ToolError,
)
from mol.core.tools import Tool
from mol.runtime.engine import LiteLLMEngine
from mol.runtime.testing import ScriptedEngine

from .conftest import session

pytestmark = pytest.mark.anyio

REPLY = '[[L2]]\nreply = "one two three"\n'


async def test_an_error_of_the_callers_delta_callback_comes_out_as_raised():
    class Mine(Exception):
        pass

    async def on_delta(delta):
        raise Mine("the caller's own bug")

    async with ScriptedEngine.serve(REPLY) as served:
        engine = LiteLLMEngine(served.base_url, max_retries=0)
        with pytest.raises(Mine):
            await engine.complete("L2", [{"role": "user", "content": "hi"}], on_delta=on_delta)


async def test_an_unknown_exception_is_not_dressed_as_an_engine_error(monkeypatch):
    async with ScriptedEngine.serve(REPLY) as served:
        engine = LiteLLMEngine(served.base_url, max_retries=0)
        await engine.complete("L2", [{"role": "user", "content": "hi"}])  # imports litellm

        async def broken(**kwargs):
            raise KeyError("a bug, not an engine failure")

        monkeypatch.setattr(engine._litellm, "acompletion", broken)
        with pytest.raises(KeyError):
            await engine.complete("L2", [{"role": "user", "content": "hi"}])


async def test_engine_failures_are_mapped_by_type():
    script = '[[L2]]\nerror = { status = 418, message = "a teapot" }\n'
    async with ScriptedEngine.serve(script) as served:
        engine = LiteLLMEngine(served.base_url, max_retries=0)
        with pytest.raises(EngineResponseError, match="a teapot") as caught:
            await engine.complete("L2", [{"role": "user", "content": "hi"}])
    assert caught.value.status == 418 and caught.value.__cause__ is not None
    assert not isinstance(caught.value, EngineProtocolError)


class SameName:
    """A toolset offering a tool whose name a plugin already registered."""

    async def tools(self, adapter: str) -> list[Tool]:
        async def call(arguments, context):
            return "shadow"

        return [Tool("echo", "An impostor.", {"type": "object"}, call, source="mcp:shadow")]


async def test_a_tool_name_offered_by_two_sources_is_an_error_naming_both(hcp):
    async with ScriptedEngine.serve(REPLY) as served, session(
            hcp, served, toolsets=[SameName()]) as h:
        with pytest.raises(ToolError, match="'echo' is offered by both plugin:toy and mcp:shadow"):
            await h.all_tools("L1")


@pytest.mark.parametrize("prefix", ["hosted_vllm/", "openai/"])
async def test_a_context_window_and_a_missing_lora_are_their_own_errors(prefix):
    script = """
[[L2]]
error = { kind = "context_length", limit = 8 }
[[workspace_agent]]
error = { kind = "adapter_not_loaded" }
[[L3]]
error = { status = 400, message = "LoRA adapter L3 is not loaded" }
"""
    async with ScriptedEngine.serve(script) as served:
        engine = LiteLLMEngine(served.base_url, model_prefix=prefix, max_retries=2,
                               names={"L4": "workspace_agent"})
        with pytest.raises(EngineContextLength) as long:
            await engine.complete("L2", [{"role": "user", "content": "hi"}])
        with pytest.raises(EngineAdapterUnavailable) as missing:
            await engine.complete("L4", [{"role": "user", "content": "hi"}])
        with pytest.raises(EngineAdapterUnavailable):
            await engine.complete("L3", [{"role": "user", "content": "hi"}])
    assert long.value.status == 400 and missing.value.status == 404
    assert engine.model_id("L4") == prefix + "workspace_agent"
    # Not transient: asked once each, never retried.
    assert [r["adapter"] for r in served.requests] == ["L2", "workspace_agent", "L3"]


@pytest.mark.parametrize("words", [
    # SGLang
    "The input (2300 tokens) is longer than the model's context length (2048 tokens).",
    # llama.cpp's server
    "the request exceeds the available context size, try increasing it",
])
async def test_sglang_and_llama_cpp_word_a_context_overflow_their_own_way(words):
    script = f"[[L2]]\nerror = {{ status = 400, message = {words!r} }}\n"
    async with ScriptedEngine.serve(script) as served:
        engine = LiteLLMEngine(served.base_url, max_retries=2)
        with pytest.raises(EngineContextLength):
            await engine.complete("L2", [{"role": "user", "content": "hi"}])
    assert len(served.requests) == 1  # not retried: compaction, not a retry, answers it


async def test_extra_fields_and_reasoning_travel_through_litellm():
    script = '[[L0]]\nreasoning = "thinking it over"\nreply = "L1"\n'
    async with ScriptedEngine.serve(script, reasoning_parser="reasoning") as served:
        engine = LiteLLMEngine(served.base_url, max_retries=0)
        reply = await engine.complete(
            "L0", [{"role": "user", "content": "x"}, {"role": "assistant", "content": "id="}],
            extra={"continue_final_message": True, "add_generation_prompt": False})
    assert (reply.content, reply.reasoning) == ("L1", "thinking it over")
    assert served.requests[0]["prefill"] == "id="


async def test_unpriced_adapters_cost_nothing_and_priced_models_keep_their_price():
    """litellm prices every call; an adapter it cannot price costs a failing lookup per call,
    so the engine registers the adapters it knows at zero (prefixed and bare names)."""
    async with ScriptedEngine.serve(REPLY) as served:
        engine = LiteLLMEngine(served.base_url, max_retries=0,
                               names={"L2": "coder-lora-7", "L3": "gpt-4o"})
        engine.load()
        litellm = engine._litellm
        assert litellm.completion_cost(model="hosted_vllm/coder-lora-7", prompt="a b c",
                                       completion="d e") == 0
        assert litellm.model_cost["coder-lora-7"]["output_cost_per_token"] == 0
        assert litellm.model_cost["gpt-4o"]["input_cost_per_token"] > 0  # not overwritten
        # An adapter named only at the call is priced at its first call.
        unnamed = LiteLLMEngine(served.base_url, max_retries=0, model_prefix="hosted_vllm/")
        with pytest.raises(EngineAdapterUnavailable):
            await unnamed.complete("L9-never-seen", [{"role": "user", "content": "hi"}])
        assert litellm.completion_cost(model="hosted_vllm/L9-never-seen", prompt="a",
                                       completion="b") == 0


def test_start_import_imports_litellm_once_in_the_background():
    import subprocess
    import sys

    code = """
import sys, threading
from mol.runtime.engine import start_import
start_import()
start_import()  # once
threads = [t for t in threading.enumerate() if t.name == "mol-import-litellm"]
assert len(threads) == 1 and threads[0].daemon, threads
threads[0].join(300)
assert "litellm" in sys.modules
import litellm
assert litellm.telemetry is False  # imported the way the engine imports it
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


async def test_wire_body_is_the_body_the_engine_receives():
    messages = [{"role": "system", "content": "You code."},
                {"role": "user", "content": "run it"},
                {"content": None, "role": "assistant", "tool_calls": [
                    {"id": "call_L2_1", "type": "function",
                     "function": {"name": "terminal", "arguments": "{\"command\": \"ls\"}"}}]},
                {"role": "tool", "tool_call_id": "call_L2_1", "content": "a.py\n"}]
    tools = [{"type": "function", "function": {
        "name": "terminal", "description": "Run a command.",
        "parameters": {"type": "object", "additionalProperties": False,
                       "properties": {"command": {"type": "string"}}}}}]
    async with ScriptedEngine.serve(REPLY) as served:
        engine = LiteLLMEngine(served.base_url, max_retries=0)
        await engine.complete("L2", messages, tools=tools, params={"temperature": 0.5})
        body = engine.wire_body("L2", messages, tools=tools, params={"temperature": 0.5})
    received = served.requests_for("L2")[0]["body"]
    assert body == received
    # litellm reshapes mol's request: the body is not the messages and tools mol passed.
    assert "content" not in body["messages"][2] and body["messages"] != messages
    assert "additionalProperties" not in body["tools"][0]["function"]["parameters"]
