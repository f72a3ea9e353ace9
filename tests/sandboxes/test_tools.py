"""The built-in sandbox tools, called the way the harness calls them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mol.core.tools import Resources, ToolContext, ToolResult, run_tool
from mol.hcp.loader import load
from mol.plugins.manager import PluginManager
from mol.sandboxes import docker, owner

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

VENTI = Path(__file__).resolve().parents[2] / "hcp" / "examples" / "venti.toml"
NAMES = ["terminal", "read_file", "write_file", "edit_file", "list_dir"]


@pytest.fixture(scope="module")
def tools() -> dict[str, Any]:
    manager = PluginManager(load=[], builtin=["mol.plugins.builtin.sandbox"])
    assert manager.loaded == ["mol.plugins.builtin.sandbox"] and not manager.failures
    return manager.tools


@pytest.fixture(scope="module")
async def context(anyio_backend: str) -> AsyncIterator[ToolContext]:
    async with Resources() as resources:
        yield ToolContext(adapter="L2", session_id="test-tools", artifact=load(VENTI),
                          resources=resources)


async def call(tools: dict[str, Any], context: ToolContext, name: str,
               **arguments: Any) -> ToolResult:
    return await run_tool(tools[name], arguments, context)


def test_the_plugin_registers_five_typed_tools(tools: dict[str, Any]) -> None:
    assert sorted(tools) == sorted(NAMES)
    terminal = tools["terminal"].spec()["function"]
    assert terminal["parameters"]["required"] == ["command"]
    assert set(terminal["parameters"]["properties"]) == {"command", "timeout"}
    assert "persistent shell" in terminal["description"]
    edit = tools["edit_file"].parameters
    assert edit["required"] == ["path", "old", "new"]
    assert tools["list_dir"].parameters.get("required", []) == []


async def test_terminal_keeps_state_across_calls(tools: dict[str, Any],
                                                 context: ToolContext) -> None:
    first = await call(tools, context, "terminal", command="mkdir -p src && cd src && export X=1")
    assert first.content == "[exit code: 0]" and not first.is_error
    second = await call(tools, context, "terminal", command="pwd; echo $X; false")
    assert second.content == "/workspace/src\n1\n[exit code: 1]"
    assert second.data["exit_code"] == 1 and not second.is_error
    await call(tools, context, "terminal", command="cd /workspace")


async def test_terminal_reports_timeouts_and_truncation(tools: dict[str, Any],
                                                        context: ToolContext) -> None:
    slow = await call(tools, context, "terminal", command="echo start; sleep 60", timeout=1)
    assert slow.is_error and slow.content.startswith("start\n")
    assert "[Timed out after 1 s: the command and every process it started were killed.]" \
        in slow.content
    long = await call(tools, context, "terminal", command="seq 1 100000")
    assert "bytes dropped ..." in long.content and "[Output truncated:" in long.content
    bad = await call(tools, context, "terminal", command="true", timeout=-1)
    assert bad.is_error and "positive" in bad.content
    missing = await call(tools, context, "terminal")
    assert missing.is_error and "command: Field required" in missing.content


async def test_write_read_and_edit(tools: dict[str, Any], context: ToolContext) -> None:
    wrote = await call(tools, context, "write_file", path="pkg/app.py",
                       content="def f():\n    return 1\n\ndef g():\n    return 1\n")
    assert wrote.content == "Wrote 45 bytes to /workspace/pkg/app.py."
    read = await call(tools, context, "read_file", path="pkg/app.py")
    assert read.content == "def f():\n    return 1\n\ndef g():\n    return 1\n"
    twice = await call(tools, context, "edit_file", path="pkg/app.py", old="return 1", new="x")
    assert twice.is_error and "occurs 2 times" in twice.content and "unchanged" in twice.content
    never = await call(tools, context, "edit_file", path="pkg/app.py", old="nope", new="x")
    assert never.is_error and "does not occur" in never.content
    once = await call(tools, context, "edit_file", path="pkg/app.py",
                      old="def g():\n    return 1", new="def g():\n    return 2")
    assert once.content == "Replaced 1 occurrence in pkg/app.py (at line 4)."
    ran = await call(tools, context, "terminal",
                     command="python3 -c 'import sys; sys.path.insert(0, \"pkg\"); "
                             "import app; print(app.f(), app.g())'")
    assert ran.content == "1 2\n[exit code: 0]"


async def test_file_tools_refuse_escapes_with_a_readable_error(tools: dict[str, Any],
                                                               context: ToolContext) -> None:
    for name, arguments in [("read_file", {"path": "../etc/passwd"}),
                            ("write_file", {"path": "/etc/evil", "content": "x"}),
                            ("edit_file", {"path": "/etc/passwd", "old": "root", "new": "x"}),
                            ("list_dir", {"path": "/"})]:
        result = await call(tools, context, name, **arguments)
        assert result.is_error and result.content.startswith("Error: "), result
        assert "workspace" in result.content or "'..'" in result.content


async def test_list_dir_and_binary_read(tools: dict[str, Any], context: ToolContext) -> None:
    await call(tools, context, "terminal", command="mkdir -p d/e && printf '\\x00\\xff' > d/bin")
    listing = await call(tools, context, "list_dir", path="d")
    assert [line.split()[-1] for line in listing.content.splitlines()[1:]] == [
        ".", "..", "e", "bin"]
    binary = await call(tools, context, "read_file", path="d/bin")
    assert binary.content == "\\x00\\xff"


async def test_one_sandbox_per_session_removed_at_session_end() -> None:
    manager = PluginManager(load=[], builtin=["mol.plugins.builtin.sandbox"])
    async with Resources() as resources:
        context = ToolContext(adapter="L2", session_id="test-session-end", artifact=load(VENTI),
                              resources=resources)
        await run_tool(manager.tools["terminal"], {"command": "echo a > f"}, context)
        same = await run_tool(manager.tools["read_file"], {"path": "f"}, context)
        assert same.content == "a\n"
        sandbox = resources.peek("sandbox")
        containers = await docker.call(docker.list_containers, owner.LABEL, what="list")
        assert sandbox.id in [c["Id"] for c in containers]
        found = next(c for c in containers if c["Id"] == sandbox.id)
        labels = found["Labels"]
        assert owner.session_of(found["Names"][0]) == "test-session-end"
        assert labels[owner.LABEL] == "session"
        assert labels[owner.OWNER] == owner.current().label()
        container_id = sandbox.id
    containers = await docker.call(docker.list_containers, owner.LABEL, what="list")
    assert container_id not in [c["Id"] for c in containers]
