"""``[sandbox] acp_client``: the editor's folder and terminals serve mol's file and terminal
tools (no Docker sandbox); the editor is shown each write as a diff and each command's
terminal, and a path outside the session's folder is refused."""

from __future__ import annotations

import anyio
import pytest
from acp import text_block

from mol.runtime.testing import ScriptedEngine

from .conftest import Editor, initialized, mol_acp, write_hcp

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L2"
[[L2]]
when = "make the notes"
tool_calls = [{ name = "write_file", arguments = { path = "notes/a.txt", content = "one\\ntwo\\n" } }]
[[L2]]
when = "^Wrote"
tool_calls = [{ name = "edit_file", arguments = { path = "notes/a.txt", old = "two", new = "three" } }]
[[L2]]
when = "^Replaced 1 occurrence"
tool_calls = [{ name = "terminal", arguments = { command = "cat notes/a.txt && pwd" } }]
[[L2]]
when = "exit code: 0"
tool_calls = [{ name = "read_file", arguments = { path = "../elsewhere.txt" } }]
[[L2]]
when = "outside the session's folder"
reply = "Done."
"""

SERVED = """\
[sandbox]
acp_client = ["files", "terminal"]
[summary]
enabled = false
"""


def updates_of(editor: Editor, name: str) -> list[dict]:
    """The updates of the call of tool ``name``."""
    (start,) = [u for u in editor.updates if u["sessionUpdate"] == "tool_call"
                and u["_meta"]["mol"]["tool"] == name]
    return [u for u in editor.updates if u.get("toolCallId") == start["toolCallId"]]


async def test_the_editor_serves_the_file_and_terminal_tools(tmp_path):
    hcp = write_hcp(tmp_path, SERVED).read_text().replace(
        'tools.allow = ["mcp__clock__convert_time"]',
        'tools.allow = ["write_file", "edit_file", "terminal", "read_file"]')
    (tmp_path / "mol.toml").write_text(hcp)
    project = tmp_path / "project"
    project.mkdir()
    editor = Editor(project)
    async with ScriptedEngine.serve(SCRIPT) as engine:
        with anyio.fail_after(120):
            async with mol_acp(editor, tmp_path / "mol.toml", engine, tmp_path / "log") as conn:
                await initialized(conn, fs={"readTextFile": True, "writeTextFile": True},
                                  terminal=True)
                session = await conn.new_session(cwd=str(project), mcp_servers=[])
                done = await conn.prompt(session_id=session.session_id,
                                         prompt=[text_block("make the notes")])
    assert done.stop_reason == "end_turn", (tmp_path / "log").read_text()
    assert (project / "notes" / "a.txt").read_text() == "one\nthree\n"
    target = str(project / "notes" / "a.txt")
    write = updates_of(editor, "write_file")
    assert write[0]["kind"] == "edit" and write[0]["locations"] == [{"path": target}]
    assert write[-1]["status"] == "completed"
    assert write[-1]["content"][0] == {"type": "diff", "path": target, "newText": "one\ntwo\n"}
    edit = updates_of(editor, "edit_file")
    assert edit[-1]["content"][0] == {"type": "diff", "path": target, "oldText": "one\ntwo\n",
                                      "newText": "one\nthree\n"}
    assert {"path": target, "line": 2} in [loc for u in edit for loc in u.get("locations", [])]
    (terminal,) = editor.terminals.values()
    assert terminal["command"] == ["bash", "-c", "cat notes/a.txt && pwd"]
    assert terminal["cwd"] == str(project) and terminal["released"]
    ran = updates_of(editor, "terminal")
    assert ran[0]["kind"] == "execute" and ran[0]["title"] == "cat notes/a.txt && pwd"
    assert ran[-1]["content"][0] == {"type": "terminal", "terminalId": "term-1"}
    output = ran[-1]["content"][1]["content"]["text"]
    assert output.startswith("```\none\nthree\n" + str(project)) and "[exit code: 0]" in output
    outside = updates_of(editor, "read_file")
    assert outside[-1]["status"] == "failed"
    assert "is outside the session's folder" in outside[-1]["content"][0]["content"]["text"]
    assert editor.unconforming() == []
