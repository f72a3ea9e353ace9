"""A Claude Agent SDK program (``claude-agent-sdk``): one ``query`` with a tool of its own (an
in-process MCP server), its messages printed as JSON lines. ``python claude_sdk_client.py
PROMPT CLAUDE``: ``CLAUDE`` is the Claude Code CLI the SDK drives; the environment says
where the model is (``ANTHROPIC_BASE_URL``, ``ANTHROPIC_API_KEY``). Run by
``test_claude_agent_sdk.py`` inside a loopback-only network namespace (``agents_inside.py``).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ResultMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    create_sdk_mcp_server,
    query,
    tool,
)

LOOKED_UP: list[str] = []


@tool("lookup", "Look a key up in the team's notes.", {"key": str})
async def lookup(args: dict[str, Any]) -> dict[str, Any]:
    LOOKED_UP.append(args["key"])
    return {"content": [{"type": "text", "text": f"The notes say {args['key']} is forty-two."}]}


def described(block: Any) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if isinstance(block, ToolResultBlock):
        return {"type": "tool_result", "tool_use_id": block.tool_use_id,
                "content": block.content, "is_error": block.is_error}
    return {"type": type(block).__name__}


async def main(prompt: str, cli: str) -> None:
    options = ClaudeAgentOptions(
        cli_path=cli, mcp_servers={"notes": create_sdk_mcp_server("notes", tools=[lookup])},
        allowed_tools=["mcp__notes__lookup"], max_turns=4)
    async for message in query(prompt=prompt, options=options):
        if isinstance(message, AssistantMessage | UserMessage):
            content = message.content if isinstance(message.content, list) else [
                TextBlock(text=message.content)]
            line = {"type": type(message).__name__,
                    "content": [described(block) for block in content]}
        elif isinstance(message, ResultMessage):
            line = {"type": "ResultMessage", "result": message.result,
                    "is_error": message.is_error}
        else:
            line = {"type": type(message).__name__}
        print(json.dumps(line), flush=True)
    print(json.dumps({"type": "looked_up", "keys": LOOKED_UP}), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
