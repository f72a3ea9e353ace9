"""What the editor hands mol, read: prompts, its MCP servers, the slash commands it offers; and
a permission's answer as an ``Approval``."""

from __future__ import annotations

from pathlib import Path

import pytest

from mol.acpagent import permission, sdk
from mol.acpagent.inputs import available_commands, builtin, client_servers, prompt_text
from mol.core.errors import ClientError, ConversationError
from mol.core.tools import Approval
from mol.hcp.loader import load
from mol.runtime.hooks import ToolCallInfo

from .conftest import write_hcp

DEMO = Path(__file__).resolve().parents[1] / "hcp" / "fixtures" / "demo-plugin"


def blocks(*content: dict) -> list:
    return sdk.parsed("session/prompt", {"sessionId": "s", "prompt": list(content)}).prompt


def test_a_prompt_s_blocks_are_the_turn_s_text():
    text = prompt_text(blocks(
        {"type": "text", "text": "Look at "},
        {"type": "resource_link", "uri": "file:///p/a.py", "name": "a.py"},
        {"type": "text", "text": " and fix it."},
        {"type": "resource", "resource": {"uri": "file:///p/a.py", "text": "print(1)\n"}}))
    assert text == ('Look at [@a.py](file:///p/a.py) and fix it.\n'
                    '<context ref="file:///p/a.py">\nprint(1)\n\n</context>')


@pytest.mark.parametrize(("content", "message"), [
    ({"type": "image", "data": "AAAA", "mimeType": "image/png"},
     "prompt[1].type: image content is not supported (promptCapabilities.image is false)"),
    ({"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAA"}},
     "prompt[1].resource: a binary resource (file:///b.bin) is not supported; embed text"),
])
def test_content_mol_does_not_read_is_refused_naming_the_block(content, message):
    with pytest.raises(ConversationError) as refused:
        prompt_text(blocks({"type": "text", "text": "hi"}, content))
    assert str(refused.value) == message


def test_a_prompt_without_text_is_refused():
    with pytest.raises(ConversationError, match="^prompt: no text in the prompt$"):
        prompt_text(blocks({"type": "text", "text": "  "}))


def test_the_commands_offered_are_mol_s_and_the_artifact_s(tmp_path):
    path = write_hcp(tmp_path, f'[bundles]\npaths = ["{DEMO.as_posix()}"]\n')
    path.write_text(path.read_text().replace('prompt = "You code."',
                                             'prompt = "You code."\nbundles = ["demo"]'))
    commands = available_commands(load(path))
    assert [c["name"] for c in commands] == ["compact", "review"]
    assert commands[1] == {"name": "review", "description": "Review one file with the echo tool",
                           "input": {"hint": "FILE [FOCUS]"}}
    assert builtin("/compact keep the tests") == ("compact", "keep the tests")
    assert builtin("/review a.py") is None


def test_the_editor_s_mcp_servers_join_the_session_s(tmp_path):
    servers = client_servers([
        {"name": "files", "command": "/usr/bin/fs-server", "args": ["--ro"],
         "env": [{"name": "TOKEN", "value": "t"}]},
        {"type": "http", "name": "remote", "url": "https://mcp.example/mcp",
         "headers": [{"name": "Authorization", "value": "Bearer secret"}]}],
        "/project", {"time"})
    assert servers["files"].command == "/usr/bin/fs-server" and servers["files"].args == ["--ro"]
    assert servers["files"].env == {"TOKEN": "t"} and servers["files"].cwd == "/project"
    # An editor's credential stays in memory: the artifact's rule against inline ones is
    # about files.
    assert servers["remote"].http_headers == {"Authorization": "Bearer secret"}


@pytest.mark.parametrize(("entries", "message"), [
    ([{"name": "time", "command": "x", "args": [], "env": []}],
     "mcpServers[0].name: 'time' is the artifact's MCP server name"),
    ([{"name": "a", "command": "x", "args": [], "env": []}] * 2,
     "mcpServers[1].name: 'a' is another entry's MCP server name"),
    ([{"type": "http", "name": "a", "headers": []}], "mcpServers[0].url: Field required"),
    ({"name": "a"}, "mcpServers: must be a list"),
])
def test_a_wrong_mcp_server_is_refused_naming_it(entries, message):
    with pytest.raises(ConversationError) as refused:
        client_servers(entries, "/project", {"time"})
    assert str(refused.value) == message


class Asked:
    """The editor's side of a permission request: one answer, or a failure."""

    def __init__(self, result: object) -> None:
        self.result = result
        self.params: dict = {}

    async def request(self, method: str, params: dict) -> object:
        self.params = params
        if isinstance(self.result, Exception):
            raise self.result
        return sdk.RESPONSES[method].model_validate(self.result)


class Shown:
    def call_view(self, call_id: str, name: str, arguments: object) -> dict:
        return {"toolCallId": call_id, "title": name, "rawInput": arguments}


@pytest.mark.anyio
@pytest.mark.parametrize(("outcome", "approval"), [
    ({"outcome": "selected", "optionId": "allow_once"}, Approval(True)),
    ({"outcome": "selected", "optionId": "allow_always"}, Approval(True, always=True)),
    ({"outcome": "selected", "optionId": "reject_once"}, Approval(False)),
    ({"outcome": "selected", "optionId": "reject_always"}, Approval(False, always=True)),
    ({"outcome": "cancelled"}, Approval(False, reason="the prompt was cancelled")),
    ({"outcome": "selected", "optionId": "maybe"},
     Approval(False, reason="the editor chose none of the options offered")),
])
async def test_each_permission_answer_is_an_approval(outcome, approval):
    editor = Asked({"outcome": outcome})
    call = ToolCallInfo("terminal", {"command": "rm -rf build"}, "call_L2_1", "L2")
    assert await permission.ask(editor, "s1", Shown(), call) == approval
    assert editor.params["toolCall"]["rawInput"] == {"command": "rm -rf build"}
    assert "rm -rf build" in editor.params["toolCall"]["content"][0]["content"]["text"]


@pytest.mark.anyio
async def test_an_editor_that_cannot_answer_refuses():
    editor = Asked(ClientError("the client is gone"))
    call = ToolCallInfo("terminal", {"command": "ls"}, "call_L2_1", "L2")
    answer = await permission.ask(editor, "s1", Shown(), call)
    assert answer == Approval(False, reason="the editor could not be asked: the client is gone")
