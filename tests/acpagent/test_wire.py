"""The wire of ``mol acp``: only protocol on stdout, stdin for the protocol alone, and every
bad message answered with a JSON-RPC error that says what is wrong and where."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

import anyio
import pytest

from mol.acpagent.wire import Wire

from .conftest import write_hcp

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}


def test_claiming_stdio_keeps_strays_off_the_protocol():
    """After ``claim_stdio``, a print and a child process write to stderr, and a child that
    reads stdin gets nothing of the editor's messages."""
    program = (
        "import os, subprocess\n"
        "from mol.acpagent.wire import claim_stdio\n"
        "reading, writing = claim_stdio()\n"
        "print('stray print')\n"
        "subprocess.run(['sh', '-c', 'echo stray child; cat'], check=True)\n"
        "os.write(writing, os.read(reading, 100).upper())\n")
    done = subprocess.run([sys.executable, "-c", program], input="editor says hi",
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "EDITOR SAYS HI"
    assert done.stderr == "stray print\nstray child\n"  # cat read nothing: stdin is not its


def exchange(lines: list[str], hcp: str) -> tuple[list[dict], str]:
    """What ``mol acp`` answers to ``lines`` (stdin closed after them): its stdout as
    messages, and its stderr. A line of stdout that is not a JSON-RPC message fails."""
    done = subprocess.run([sys.executable, "-m", "mol.cli", "acp", "--hcp", hcp],
                          input="".join(line + "\n" for line in lines), capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    messages = [json.loads(line) for line in done.stdout.splitlines()]
    assert all(m["jsonrpc"] == "2.0" for m in messages)
    return messages, done.stderr


@pytest.mark.slow
def test_bad_messages_get_errors_naming_the_field(tmp_path):
    hcp = str(write_hcp(tmp_path))
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp"}},
        INIT,
        {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
         "params": {"sessionId": "s", "prompt": [{"type": "text"}]}},
        {"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
         "params": {"sessionId": "s", "prompt": [{"type": "image", "data": "", "mimeType": "x"}]}},
        {"jsonrpc": "2.0", "id": 4, "method": "session/new",
         "params": {"cwd": "relative", "mcpServers": []}},
        {"jsonrpc": "2.0", "id": 5, "method": "session/new", "params": {
            "cwd": "/tmp", "mcpServers": [{"type": "sse", "name": "x", "url": "http://x",
                                           "headers": []}]}},
        {"jsonrpc": "2.0", "id": 6, "method": "session/new", "params": {
            "cwd": "/tmp", "mcpServers": [{"name": "clock", "command": "x", "env": []}]}},
        {"jsonrpc": "2.0", "id": 7, "method": "session/load",
         "params": {"cwd": "/tmp", "sessionId": "conv_nowhere", "mcpServers": []}},
        {"jsonrpc": "2.0", "id": 8, "method": "session/set_mode",
         "params": {"sessionId": "s", "modeId": "x"}},
        {"jsonrpc": "2.0", "id": 9, "method": "session/prompt",
         "params": {"sessionId": "conv_nowhere", "prompt": [{"type": "text", "text": "hi"}]}},
    ]
    lines = [json.dumps(r) for r in requests[:2]] + [
        "{not json", "[1, 2]", json.dumps({"jsonrpc": "1.0", "id": 77, "method": "x"}),
        *(json.dumps(r) for r in requests[2:])]
    messages, _ = exchange(lines, hcp)
    unread = [m["error"] for m in messages if m.get("id") is None]
    assert unread == [
        {"code": -32700, "message": "Parse error: Expecting property name enclosed in double "
                                    "quotes at column 2"},
        {"code": -32600, "message": "Invalid request: a message must be a JSON object, not an "
                                    "array (ACP sends no batches)"}]
    errors = {m["id"]: m["error"] for m in messages if m.get("id") is not None and "error" in m}
    assert errors[77] == {"code": -32600, "message": 'Invalid request: jsonrpc: must be "2.0", '
                                                     'got "1.0"'}
    assert errors[1]["message"] == "Invalid params: session/new: call initialize first"
    expected = {
        2: (-32602, "prompt[0].text: Field required", "prompt[0].text"),
        3: (-32602, "prompt[0].type: image content is not supported "
                    "(promptCapabilities.image is false)", "prompt[0].type"),
        4: (-32602, "cwd: 'relative' is not an absolute path", "cwd"),
        5: (-32602, "mcpServers[0].type: an SSE server: mol speaks streamable HTTP to MCP "
                    "servers, so give the server's HTTP endpoint is not supported (stdio (no "
                    "type) and http are)", "mcpServers[0].type"),
        6: (-32602, "mcpServers[0].args: Field required", "mcpServers[0].args"),
        7: (-32002, "sessionId: no session 'conv_nowhere' in", "sessionId"),
        9: (-32602, "sessionId: no session 'conv_nowhere' is open here", "sessionId"),
    }
    for request_id, (code, message, field) in expected.items():
        error = errors[request_id]
        assert error["code"] == code, error
        assert message in error["message"], error
        assert error["data"] == {"field": field}, error
    assert errors[8] == {"code": -32601, "message": "Method not found: session/set_mode",
                         "data": {"method": "session/set_mode"}}
    assert next(m for m in messages if m.get("id") == 0)["result"]["protocolVersion"] == 1


@pytest.mark.slow
def test_a_child_writing_to_mol_s_stdout_does_not_reach_the_protocol(tmp_path):
    """An MCP server of the artifact writes to mol's own stdout (its parent's descriptor 1)
    as it starts: the line lands on stderr, the editor reads only messages."""
    stray = ("echo stray-bytes-on-fd1 >/proc/$PPID/fd/1; "
             f"exec {sys.executable} -m mcp_server_time --local-timezone UTC")
    hcp = str(write_hcp(tmp_path, f"""\
[mcp_servers.noisy]
command = "sh"
args = ["-c", "{stray}"]
startup_timeout_sec = 60
"""))
    new = {"jsonrpc": "2.0", "id": 1, "method": "session/new",
           "params": {"cwd": str(tmp_path), "mcpServers": []}}
    lines = [json.dumps(INIT), json.dumps(new)]
    # mol exits once stdin closes; the server must have started by then: wait for its line.
    proc = subprocess.Popen([sys.executable, "-m", "mol.cli", "acp", "--hcp", hcp],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        proc.stdin.write("".join(line + "\n" for line in lines))
        proc.stdin.flush()
        seen, deadline = "", time.monotonic() + 120
        while "stray-bytes-on-fd1" not in seen:
            ready, _, _ = select.select([proc.stderr], [], [], deadline - time.monotonic())
            line = proc.stderr.readline() if ready else ""
            assert line, f"no stray line from the server on mol's stderr: {seen}"
            seen += line
        out, err = proc.communicate(input="", timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, seen + err
    messages = [json.loads(line) for line in out.splitlines()]
    assert [m.get("id") for m in messages if "id" in m] == [0, 1]
    assert "stray" not in out


@pytest.mark.anyio
async def test_the_wire_answers_what_it_cannot_read_and_reads_on():
    into_mol, editor_writes = os.pipe()
    editor_reads, out_of_mol = os.pipe()
    wire = Wire(into_mol, out_of_mol, limit=64)
    os.write(editor_writes, b'{"jsonrpc": "2.0", "method": "a"}\n'
             + b'"' + b"x" * 200 + b'"\n'  # over the limit: refused, skipped to its end
             + b'\n{"jsonrpc": "2.0", "id": 3, "method": "b"}\n')
    os.close(editor_writes)
    with anyio.fail_after(10):
        first = await wire.receive()
        wire.after_result("s1", [{"jsonrpc": "2.0", "method": "later"}])
        await wire.send({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1"}})
        second = await wire.receive()
        end = await wire.receive()
    await wire.close()
    assert first == {"jsonrpc": "2.0", "method": "a"}
    assert second == {"jsonrpc": "2.0", "id": 3, "method": "b"}
    assert end is None
    with os.fdopen(editor_reads) as reading:
        sent = [json.loads(line) for line in reading]
    assert sent == [
        {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1"}},
        {"jsonrpc": "2.0", "method": "later"},  # right after the result it waited for
        {"jsonrpc": "2.0", "id": None, "error": {
            "code": -32600, "message": "Invalid request: a message over 64 bytes"}}]
