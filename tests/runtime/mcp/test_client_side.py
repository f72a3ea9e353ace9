"""The client side of the protocol against the scripted server (handshake era, where servers
send their own requests): sampling through the engine, elicitation, roots, logs, progress,
templates and completion, and the HTTP session's DELETE at shutdown."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import anyio
import pytest

from mol.core.errors import MCPError
from mol.core.tools import ToolContext
from mol.hcp.loader import load_text
from mol.plugins.manager import PluginManager
from mol.runtime import open_runtime
from mol.runtime.mcp import MCPManager
from mol.runtime.testing import ScriptedEngine

from .conftest import artifact_text, stdio_server, wait_for

pytestmark = pytest.mark.anyio
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def load(tmp_path: Path, servers: dict, engine_url: str = "http://127.0.0.1:9/v1", **adapters):
    text = artifact_text(servers, adapters or None).replace(
        "[router]", f'[engine]\napi_base = "{engine_url}"\nmax_retries = 0\n[router]', 1)
    path = tmp_path / "mol.toml"
    path.write_text(text)
    return load_text(text, base_dir=tmp_path, path=path)


SAMPLING_TURN = """
[[L0]]
constrained = true
reply = "L1"
[[L1]]
tool_calls = [{ name = "mcp__s__ask_model", arguments = { question = "sky color?" } }]
[[L0]]
when = "sky color?"
reply = "blue"
usage = { prompt_tokens = 30, completion_tokens = 2 }
[[L1]]
when = "the model said"
reply = "The sky is blue."
[[L0]]
constrained = false
times = -1
reply = "L1 answered."
"""


async def test_sampling_answers_through_the_engine_and_counts_in_the_turn(tmp_path):
    servers = {"s": stdio_server("--legacy", sampling={"adapter": "L0", "max_tokens": 64})}
    async with ScriptedEngine.serve(SAMPLING_TURN) as engine:
        hcp = load(tmp_path, servers, engine.base_url,
                   L1={"mcp_servers": ["s"], "tools.allow": ["mcp__s__*"]})
        async with open_runtime(hcp, engine_url=engine.base_url,
                                plugins=PluginManager(None, builtin=())) as runtime, \
                runtime.session() as harness:
            result = await harness.turn("what color is the sky?")
    assert result.answer == "The sky is blue."
    [returned] = [e for e in result.events if e.type == "tool_result"]
    assert returned.content == "the model said: blue (L0)" and not returned.is_error
    [sampled] = [e for e in result.events if e.type == "model_call" and e.purpose == "sampling"]
    assert sampled.adapter == "L0" and sampled.usage["prompt_tokens"] == 30
    [request] = [r for r in engine.requests_for("L0") if "sky color?" in str(r["body"]["messages"])]
    assert request["body"]["max_tokens"] == 64  # the server asked for 5000: capped by the HCP
    assert request["body"]["messages"][0] == {"role": "system", "content": "Answer in one word."}
    assert result.usage["prompt_tokens"] >= 30


async def test_sampling_is_refused_when_not_allowed_and_not_offered_when_unset(tmp_path):
    servers = {"no": stdio_server("--legacy", sampling={"allow": False}), "unset": stdio_server("--legacy")}
    async with MCPManager(load(tmp_path, servers)) as mcp:
        refused = await mcp.call("L1", "mcp__no__ask_model", {"question": "hi"})
        unset = await mcp.call("L1", "mcp__unset__ask_model", {"question": "hi"})
    assert refused.is_error and "does not allow MCP server 'no' to sample" in refused.content
    assert unset.is_error and "Sampling not supported" in unset.content


async def test_elicitation_goes_to_the_asker_with_defaults_or_is_declined(tmp_path):
    asked = []

    async def ask(server: str, request: dict) -> dict:
        asked.append((server, request["message"]))
        return {"action": "accept", "content": {"name": "Ada"}}

    servers = {"s": stdio_server("--legacy"), "d": stdio_server("--legacy", elicitation="decline")}
    async with MCPManager(load(tmp_path, servers), elicit=ask) as mcp:
        accepted = await mcp.call("L1", "mcp__s__ask_user", {})
        declined = await mcp.call("L1", "mcp__d__ask_user", {})
    async with MCPManager(load(tmp_path, {"s": stdio_server("--legacy")})) as mcp:
        headless = await mcp.call("L1", "mcp__s__ask_user", {})
    assert accepted.content == "accept: {'name': 'Ada', 'color': 'blue'}"  # the default filled in
    assert asked == [("s", "What is your name?")]
    assert declined.content == "decline: None" and headless.content == "decline: None"


@pytest.mark.parametrize("asker", ["raises", "junk", "nested"])
async def test_an_asker_that_fails_answers_cancel_and_nothing_breaks(tmp_path, asker, caplog):
    """Whatever the asker does (raise, answer something that is no answer, or content the
    protocol cannot carry), the server gets ``cancel``: no internal error, and the session
    goes on."""
    async def ask(server: str, request: dict) -> object:
        if asker == "raises":
            raise RuntimeError("Attempted to exit a cancel scope that isn't the current one")
        if asker == "junk":
            return {"action": "maybe"}
        return {"action": "accept", "content": {"name": {"first": "Ada"}}}

    async with MCPManager(load(tmp_path, {"s": stdio_server("--legacy")}), elicit=ask) as mcp:
        answered = await mcp.call("L1", "mcp__s__ask_user", {})
        after = await mcp.call("L1", "mcp__s__echo", {"text": "still here"})
    assert (answered.is_error, answered.content) == (False, "cancel: None")
    assert (after.is_error, after.content) == (False, "still here")
    assert "Traceback" not in caplog.text


async def test_elicitation_amid_calls_of_several_sessions_is_declined(tmp_path, call_log):
    """A handshake-era request cannot say which call it belongs to: with another session's
    call in flight on the same server, asking the most recent caller could show one
    session's form to another's person."""
    asked = []

    async def ask(server: str, request: dict) -> dict:
        asked.append(request["message"])
        return {"action": "accept", "content": {"name": "Ada"}}

    mine = ToolContext(adapter="L1", session_id="conv_mine", elicit=ask)
    async with MCPManager(load(tmp_path, {"s": stdio_server("--legacy")})) as mcp:
        async with anyio.create_task_group() as group:
            group.start_soon(mcp.call, "L1", "mcp__s__hang", {"seconds": 30},
                             ToolContext(adapter="L1", session_id="conv_other"))
            await wait_for(lambda: "call hang" in call_log.read_text(), within=60)
            amid = await mcp.call("L1", "mcp__s__ask_user", {}, mine)
            group.cancel_scope.cancel()
        alone = await mcp.call("L1", "mcp__s__ask_user", {}, mine)
    assert amid.content == "decline: None"
    assert alone.content == "accept: {'name': 'Ada', 'color': 'blue'}"
    assert asked == ["What is your name?"]


async def test_a_persons_answer_stops_the_calls_clock_and_ends_with_the_call(tmp_path):
    """The person may take longer than ``tool_timeout_sec``: that time does not count. A
    call that ends (cancelled with its turn) ends the wait for the person too."""
    asked, ended = anyio.Event(), anyio.Event()

    async def slow(server: str, request: dict) -> dict:
        await anyio.sleep(4)  # past the call's 3 s
        return {"action": "accept", "content": {"name": "Ada"}}

    async def forever(server: str, request: dict) -> dict:
        asked.set()
        try:
            await anyio.sleep(3600)
        finally:
            ended.set()
        return {"action": "decline"}

    servers = {"s": stdio_server("--legacy", tool_timeout_sec=3)}
    async with MCPManager(load(tmp_path, servers)) as mcp:
        slowly = await mcp.call("L1", "mcp__s__ask_user", {},
                                ToolContext(adapter="L1", elicit=slow))
        async with anyio.create_task_group() as group:
            group.start_soon(mcp.call, "L1", "mcp__s__ask_user", {},
                             ToolContext(adapter="L1", elicit=forever))
            await asked.wait()
            group.cancel_scope.cancel()  # the turn is cancelled while the person thinks
        with anyio.fail_after(10):
            await ended.wait()
    assert slowly.content == "accept: {'name': 'Ada', 'color': 'blue'}"


async def test_roots_are_the_configured_folders_then_the_sandbox_workspace(tmp_path):
    (tmp_path / "docs").mkdir()
    async with MCPManager(load(tmp_path, {"s": stdio_server("--legacy", roots=["docs"])})) as mcp:
        before = await mcp.call("L1", "mcp__s__show_roots", {})
        context = ToolContext(adapter="L1")
        context.resources._items["sandbox"] = object()  # the session opened its sandbox
        after = await mcp.call("L1", "mcp__s__show_roots", {}, context)
    assert before.content == (tmp_path / "docs").as_uri()
    assert after.content == f"{(tmp_path / 'docs').as_uri()} file:///workspace"


async def test_server_logs_land_in_mols_log_and_progress_becomes_events(tmp_path, caplog):
    events = []

    async def emit(event):
        events.append(event)

    caplog.set_level(logging.INFO, logger="mol.mcp.server.s")
    servers = {"s": stdio_server("--legacy", log_level="info", tool_timeout_sec=0.5)}
    async with MCPManager(load(tmp_path, servers)) as mcp:
        shouted = await mcp.call("L1", "mcp__s__shout", {})
        context = ToolContext(adapter="L1", call_id="call_L1_1", emit=emit)
        await mcp.call("L1", "mcp__s__progress_forever", {}, context)
    assert shouted.content == "shouted"
    assert "the server shouts" in caplog.text
    progress = [e for e in events if e.type == "tool_progress"]
    assert progress and progress[0].call_id == "call_L1_1" and progress[0].message == "step 1"


async def test_templates_completion_ping_and_subscriptions(tmp_path):
    async with MCPManager(load(tmp_path, {"s": stdio_server("--legacy")})) as mcp:
        await mcp.wait_ready()
        conn = await mcp.servers["s"].connection()
        [template] = await conn.list_resource_templates()
        assert await conn.ping() >= 0
        with pytest.raises(MCPError, match="does not offer resource subscriptions"):
            await conn.subscribe("memo://readme")
        values = await conn.complete({"type": "ref/prompt", "name": "greet"},
                                     {"name": "name", "value": "A"})
    assert template.uri_template == "memo://notes/{topic}"
    assert values == ["Ada", "Alan"]


@pytest.mark.parametrize("http_server", [("--legacy",)], indirect=True)
async def test_the_http_session_delete_reaches_the_server_at_shutdown(tmp_path, http_server, call_log):
    async with MCPManager(load(tmp_path, {"h": {"url": http_server.url}})) as mcp:
        result = await mcp.call("L1", "mcp__h__echo", {"text": "hi"})
        assert result.content == "hi"
        assert mcp.status()[0].protocol_version < "2026"  # a session-based (handshake) server
    # Asserted on the server side: the DELETE arrived before mol's teardown finished.
    assert "http DELETE" in call_log.read_text()


async def test_a_cancelled_turn_cancels_the_call_at_the_server(tmp_path, call_log):
    async with MCPManager(load(tmp_path, {"s": stdio_server("--legacy")})) as mcp:
        await mcp.wait_ready()
        with anyio.move_on_after(1.0):  # the turn is cancelled while the call hangs
            await mcp.call("L1", "mcp__s__hang", {})
        await wait_for(lambda: "cancelled hang" in call_log.read_text(), within=10)
        assert (await mcp.call("L1", "mcp__s__echo", {"text": "still"})).content == "still"


def test_the_elicitation_actions_are_the_sdks():
    """mol's answers (and the server's check of a client's) use the actions the protocol
    defines, as the SDK's ``ElicitResult`` spells them."""
    import typing

    import mcp_types

    from mol.core.tools import ELICIT_ACTIONS

    action = mcp_types.ElicitResult.model_fields["action"].annotation
    assert ELICIT_ACTIONS == typing.get_args(action)
