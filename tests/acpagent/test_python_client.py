"""``mol acp`` driven by the official Python client library (PyPI ``agent-client-protocol``):
initialize, a new session with the editor's MCP server, a prompt streamed as updates, a tool
call shown with its updates, a permission answered both ways, a cancelled turn, and a second
process that loads the session and sees its history."""

from __future__ import annotations

import anyio
import pytest
from acp import PROTOCOL_VERSION, text_block

from mol.runtime import open_store
from mol.runtime.testing import ScriptedEngine

from .conftest import CLOCK, SCRIPT, Editor, HTTPServer, initialized, mol_acp, write_hcp

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def texts(updates: list[dict], kind: str) -> str:
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == kind)


def calls_of(updates: list[dict]) -> dict[str, list[dict]]:
    """Each tool call's updates, the ``tool_call`` first, by call id."""
    found: dict[str, list[dict]] = {}
    for update in updates:
        if update["sessionUpdate"] in ("tool_call", "tool_call_update"):
            found.setdefault(update["toolCallId"], []).append(update)
    return found


async def test_initialize_and_a_prompt_streamed_as_updates(tmp_path):
    editor = Editor(tmp_path)
    async with ScriptedEngine.serve(SCRIPT) as engine:
        with anyio.fail_after(120):
            async with mol_acp(editor, write_hcp(tmp_path), engine, tmp_path / "log") as conn:
                init = await initialized(conn)
                new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[CLOCK])
                answer = await conn.prompt(session_id=new.session_id,
                                           prompt=[text_block("hello there")])
                streamed = list(editor.updates)
                compacted = await conn.prompt(session_id=new.session_id,
                                              prompt=[text_block("/compact keep the greeting")])
    assert init.protocol_version == PROTOCOL_VERSION
    offered = init.agent_capabilities
    assert offered.load_session and offered.prompt_capabilities.embedded_context
    assert not offered.prompt_capabilities.image and not offered.prompt_capabilities.audio
    assert offered.mcp_capabilities.http and not offered.mcp_capabilities.sse
    assert init.agent_info.name == "mol"
    assert answer.stop_reason == "end_turn"
    assert answer.field_meta == {"mol": {"adapter": "L1", "route": "routed"}}
    assert compacted.stop_reason == "end_turn"  # /compact ran, and said what it did
    (said,) = editor.updates[len(streamed):]
    assert said["content"]["text"].startswith("Compacted L1: about ")
    assert "keep the greeting" in str(engine.requests_for("L1")[-1]["body"]["messages"])
    commands = editor.updates[0]
    assert commands["sessionUpdate"] == "available_commands_update"
    assert [c["name"] for c in commands["availableCommands"]] == ["compact"]
    chunks = [u for u in streamed if u["sessionUpdate"] == "agent_message_chunk"]
    assert len(chunks) > 1  # streamed, not sent whole at the end
    assert texts(streamed, "agent_message_chunk") == "Hello from L1."
    assert texts(streamed, "agent_thought_chunk") == "a greeting"
    assert {c["_meta"]["mol"]["adapter"] for c in chunks} == {"L1"}
    assert editor.unconforming() == []


async def test_a_tool_call_with_its_updates_and_permission_answered_both_ways(tmp_path):
    editor = Editor(tmp_path, answers=["allow_once", "reject_once", "allow_always"])
    async with ScriptedEngine.serve(SCRIPT) as engine:
        with anyio.fail_after(120):
            async with mol_acp(editor, write_hcp(tmp_path), engine, tmp_path / "log") as conn:
                await initialized(conn)
                session = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[CLOCK]))
                stops = []
                for _ in range(4):  # allowed, rejected, always allowed, then not asked again
                    done = await conn.prompt(session_id=session.session_id,
                                             prompt=[text_block("clock please")])
                    stops.append(done.stop_reason)
    assert stops == ["end_turn"] * 4
    assert len(editor.permissions) == 3  # the fourth call ran on the remembered answer
    asked = editor.permissions[0]
    assert asked["options"] == ["allow_once", "allow_always", "reject_once", "reject_always"]
    assert asked["toolCall"]["title"] == "get_current_time (clock)"
    assert asked["toolCall"]["rawInput"] == {"timezone": "UTC"}
    assert '"timezone": "UTC"' in asked["toolCall"]["content"][0]["content"]["text"]
    allowed, rejected, always, remembered = calls_of(editor.updates).values()
    assert [u["status"] for u in allowed] == ["pending", "in_progress", "completed"]
    assert allowed[0]["kind"] == "other" and allowed[0]["title"] == "get_current_time (clock)"
    assert allowed[0]["_meta"]["mol"] == {"adapter": "L1", "tool": "mcp__clock__get_current_time"}
    assert '"datetime"' in allowed[-1]["content"][0]["content"]["text"]
    assert [u["status"] for u in rejected] == ["pending", "failed"]
    assert "did not approve" in rejected[-1]["content"][0]["content"]["text"]
    assert [u["status"] for u in always][-1] == [u["status"] for u in remembered][-1] == "completed"
    answers = texts(editor.updates, "agent_message_chunk")
    assert answers == ("The clock answered." "You kept the clock from me."
                       "The clock answered." "The clock answered.")
    # The adapter read the refusal as the call's result.
    results = [r["body"]["messages"][-1] for r in engine.requests_for("L1")
               if r["body"]["messages"][-1]["role"] == "tool"]
    assert len(results) == 4
    assert "was not run: the user did not approve it" in results[1]["content"]
    assert editor.unconforming() == []


async def test_cancel_stops_a_slow_turn(tmp_path):
    editor = Editor(tmp_path)
    async with ScriptedEngine.serve(SCRIPT) as engine:
        with anyio.fail_after(120):
            async with mol_acp(editor, write_hcp(tmp_path), engine, tmp_path / "log") as conn:
                await initialized(conn)
                session_id = (await conn.new_session(cwd=str(tmp_path),
                                                     mcp_servers=[CLOCK])).session_id
                outcome: dict = {}

                async def prompt() -> None:
                    outcome["done"] = await conn.prompt(session_id=session_id,
                                                        prompt=[text_block("a slow one")])

                async with anyio.create_task_group() as group:
                    group.start_soon(prompt)
                    # The tool ran; the answer it leads to is a minute away.
                    await editor.wait_for(lambda u: u.get("status") == "completed")
                    await conn.cancel(session_id=session_id)
                after = await conn.prompt(session_id=session_id, prompt=[text_block("hello")])
    assert outcome["done"].stop_reason == "cancelled"
    assert after.stop_reason == "end_turn"  # the session goes on
    async with open_store(f"sqlite:///{tmp_path / 'sessions.db'}") as store:
        stored = await store.load(session_id)
    assert [(t.user, t.status) for t in stored.turns] == [("a slow one", "interrupted"),
                                                          ("hello", "complete")]


async def test_a_second_process_loads_the_session_and_sees_its_history(tmp_path):
    first = Editor(tmp_path, answers=["allow_always"])
    hcp = write_hcp(tmp_path)
    async with ScriptedEngine.serve(SCRIPT) as engine:
        with anyio.fail_after(180):
            async with mol_acp(first, hcp, engine, tmp_path / "log") as conn:
                await initialized(conn)
                session_id = (await conn.new_session(cwd=str(tmp_path),
                                                     mcp_servers=[CLOCK])).session_id
                for text in ("hello there", "clock please"):
                    await conn.prompt(session_id=session_id, prompt=[text_block(text)])
            second = Editor(tmp_path)  # answers nothing: the always-answer is stored
            async with mol_acp(second, hcp, engine, tmp_path / "log") as conn:
                await initialized(conn)
                await conn.load_session(cwd=str(tmp_path), session_id=session_id,
                                        mcp_servers=[CLOCK])
                replayed = list(second.updates)
                again = await conn.prompt(session_id=session_id,
                                          prompt=[text_block("clock please")])
    assert again.stop_reason == "end_turn" and second.permissions == []
    kinds = [u["sessionUpdate"] for u in replayed]
    assert kinds[-1] == "available_commands_update"
    assert [u["content"]["text"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"
            ] == ["hello there", "clock please"]
    assert texts(replayed, "agent_message_chunk") == "Hello from L1.The clock answered."
    assert texts(replayed, "agent_thought_chunk") == "a greeting"
    (call,) = calls_of(replayed).values()
    assert [u["status"] for u in call] == ["pending", "in_progress", "completed"]
    assert call[0]["title"] == "get_current_time (clock)"
    # Shown in order: the user's turn, the call, then the answer it led to.
    assert kinds.index("tool_call") < kinds.index("agent_message_chunk", kinds.index("tool_call"))
    # The adapter's view goes on from the stored one.
    last = engine.requests_for("L1")[-2]["body"]["messages"]
    assert {"role": "user", "content": "hello there"} in last
    assert first.unconforming() == second.unconforming() == []


async def test_the_editor_s_http_mcp_server_joins_the_session(tmp_path, monkeypatch):
    calls = tmp_path / "calls.log"
    monkeypatch.setenv("MOL_TEST_LOG", str(calls))
    web = HTTPServer()
    web.start()
    editor = Editor(tmp_path)
    try:
        async with ScriptedEngine.serve(SCRIPT) as engine:
            with anyio.fail_after(120):
                async with mol_acp(editor, write_hcp(tmp_path), engine, tmp_path / "log") as conn:
                    await initialized(conn)
                    session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[{
                        "type": "http", "name": "web", "url": web.url,
                        "headers": [{"name": "Authorization", "value": "Bearer editor-token"}]}])
                    done = await conn.prompt(session_id=session.session_id,
                                             prompt=[text_block("echo please")])
    finally:
        web.kill()
    assert done.stop_reason == "end_turn"
    assert "call echo via http" in calls.read_text()
    (call,) = calls_of(editor.updates).values()
    assert [u["status"] for u in call] == ["pending", "completed"]
    assert call[0]["title"] == "echo (web)"
    assert texts(editor.updates, "agent_message_chunk") == "The web server echoed."
