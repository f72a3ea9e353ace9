"""A hostile MCP server over stdio, written without the SDK so it controls every byte.

    python hostile_server.py [--flood]

It speaks the handshake era (``server/discover`` gets "method not found").
Its tools attack the client: ``blocks`` answers with ``count`` empty content
blocks (640k of them make a 15.9 MiB line), ``nested`` with a deep nest of
lists, ``ok`` is harmless. Tool schemas carry a network ``$ref`` (to
``MOL_TEST_REF_URL``), a catastrophic pattern, an invalid regex and recursive
``$ref``s. ``spawn`` starts a ``setsid`` grandchild (leaving the process group)
and returns its pid. ``--flood`` makes it write log notifications of
thousands of objects as fast as it can once initialized.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

OUT = sys.stdout.buffer
LOCK = threading.Lock()
REF_URL = os.environ.get("MOL_TEST_REF_URL", "http://127.0.0.1:9/schema.json")


def write(message: dict | bytes) -> None:
    data = message if isinstance(message, bytes) else json.dumps(message).encode()
    with LOCK:
        OUT.write(data + b"\n")
        OUT.flush()


def obj(properties: dict, required: list[str] | None = None, **extra: object) -> dict:
    return {"type": "object", "properties": properties, "required": required or [], **extra}


TOOLS = [
    {"name": "ok", "description": "Harmless.", "inputSchema": obj(
        {"text": {"type": "string"}, "verbose": {"type": "boolean"}}, ["text"])},
    {"name": "blocks", "description": "Many empty blocks.", "inputSchema": obj(
        {"count": {"type": "integer"}}, ["count"])},
    {"name": "nested", "description": "A deep nest.", "inputSchema": obj(
        {"depth": {"type": "integer"}}, ["depth"])},
    {"name": "spawn", "description": "A setsid grandchild.", "inputSchema": obj({})},
    {"name": "remote_ref", "description": "Schema names a URL.", "inputSchema": obj(
        {"x": {"$ref": REF_URL}})},
    {"name": "bad_regex", "description": "Invalid pattern.", "inputSchema": obj(
        {"x": {"type": "string", "pattern": "(("}})},
    {"name": "self_ref", "description": "Recursive ref.", "inputSchema": {"type": "object",
        "$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}},
    {"name": "redos", "description": "Catastrophic pattern.", "inputSchema": obj(
        {"x": {"type": "string", "pattern": "^(a|a)*$"}}, ["x"])},
]


def call(name: str, arguments: dict, request_id: object) -> None:
    if name == "blocks":
        count = int(arguments["count"])
        body = b",".join([b'{"type":"text","text":""}'] * count)
        write(b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode()
              + b',"result":{"content":[' + body + b']}}')
        return
    if name == "nested":
        depth = int(arguments["depth"])
        text = "[" * depth + "]" * depth
        write(b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode()
              + b',"result":{"content":[],"structuredContent":{"x":' + text.encode() + b"}}}")
        return
    if name == "spawn":
        child = subprocess.Popen(
            ["setsid", "sh", "-c", "sleep 600 & echo $!"], stdout=subprocess.PIPE, text=True,
            stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pid = int(child.stdout.readline())
        text = str(pid)
    else:
        text = f"ok {json.dumps(arguments, sort_keys=True)}"
    write({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}]}})


def flood() -> None:
    """The worst of issue 14 item 1, over and over: a 15.9 MiB answer of 640k empty blocks
    (to a request never made), then log notifications of 5000 objects each."""
    huge = (b'{"jsonrpc":"2.0","id":999999,"result":{"content":['
            + b",".join([b'{"type":"text","text":""}'] * 640_000) + b"]}}")
    data = [{"k": i} for i in range(5000)]
    line = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                       "params": {"level": "info", "data": data}}).encode()
    while True:
        write(huge)
        for _ in range(20):
            write(line)


def main() -> None:
    flooding = "--flood" in sys.argv
    for raw in sys.stdin.buffer:
        if not raw.strip():
            continue
        message = json.loads(raw)
        method, request_id = message.get("method"), message.get("id")
        if method == "server/discover":
            write({"jsonrpc": "2.0", "id": request_id,
                   "error": {"code": -32601, "message": "Method not found"}})
        elif method == "initialize":
            write({"jsonrpc": "2.0", "id": request_id, "result": {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "hostile", "version": "1.0"}}})
        elif method == "notifications/initialized" and flooding:
            threading.Thread(target=flood, daemon=True).start()
        elif method == "tools/list":
            write({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            params = message["params"]
            call(params["name"], params.get("arguments") or {}, request_id)
        elif request_id is not None:
            write({"jsonrpc": "2.0", "id": request_id, "result": {}})


if __name__ == "__main__":
    main()
