"""``mol hcp import``: a Claude Code project and a Codex config.toml become artifacts that
``mol hcp validate`` accepts and whose MCP servers start."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mol.cli.main import main
from mol.hcp.importer import BASE
from mol.hcp.loader import load
from mol.runtime.mcp import MCPManager

from .conftest import FIXTURES

CLAUDE = FIXTURES / "claude-project"
CODEX = FIXTURES / "codex-home" / "config.toml"


def run(capsys, *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


async def started_tools(path: Path) -> tuple[list[str], str]:
    artifact = load(path)
    async with MCPManager(artifact) as mcp:
        tools = [t.name for t in await mcp.all_tools()]
        answer = await mcp.call("L2", "mcp__notes__add_note", {"text": "imported"})
    return tools, answer.content


@pytest.mark.anyio
async def test_import_a_claude_code_project(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DEMO_NOTES_TOKEN", "t")
    out = tmp_path / "claude.toml"
    code, stdout, report = run(capsys, "hcp", "import", "--from", "claude", CLAUDE, "-o", out)
    assert (code, stdout) == (0, "")
    mapped = [line for line in report.splitlines() if line.startswith("mapped: ")]
    unmapped = [line for line in report.splitlines() if line.startswith("not mapped: ")]
    assert [line.split(": ", 2)[2] for line in mapped] == [
        "MCP server notes (for L1, L2)", "1 PreToolUse hook(s)",
        "skills/ and commands/ as bundle 'claude' (for L1, L2)"]
    for expected in ("mcpServers.events: type 'sse' is not supported",
                     "settings.json: permissions: not mapped",
                     "hooks.Stop[0].hooks[0]: hook type 'prompt' is not supported",
                     "hooks.SessionEnd: event not supported by mol",
                     ".claude/agents: not mapped (mol has no agents)"):
        assert sum(expected in line for line in unmapped) == 1, expected
    assert run(capsys, "hcp", "validate", out)[0] == 0
    artifact = load(out)
    assert artifact.doc.parent == load(BASE).digest  # lineage: the artifact it started from
    [hook] = artifact.doc.hooks.PreToolUse
    assert hook.matcher == "terminal|write_file"
    assert hook.hooks[0].command.endswith("claude-project/.claude/hooks/check.py")
    assert "release-notes" in artifact.doc.adapter("L2").skills
    assert sorted(artifact.commands) == ["claude:summarize", "summarize"]
    assert await started_tools(out) == (["mcp__notes__add_note"],
                                        "project: 1 note(s), with token")


@pytest.mark.anyio
async def test_import_a_codex_config(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NOTES_TOKEN", "t")
    code, stdout, report = run(capsys, "hcp", "import", "--from", "codex", CODEX)
    assert code == 0 and stdout.startswith("schema_version = 2\nname = \"venti-codex-home\"\n")
    for expected in ("mapped: ", "MCP server notes (for L1, L2)",
                     "features.shell_tool: terminal denied for every adapter",
                     "1 skill(s) (for L1, L2)",
                     "not mapped: ", "features.web_search_request: not mapped",
                     "config.toml: model: not mapped"):
        assert expected in report, expected
    out = tmp_path / "codex.toml"
    code = run(capsys, "hcp", "import", "--from", "codex", CODEX, "-o", out)[0]
    assert code == 0 and run(capsys, "hcp", "validate", out)[0] == 0
    artifact = load(out)
    assert "terminal" in artifact.doc.adapter("L2").tools.deny
    assert "changelog" in artifact.doc.adapter("L1").skills
    server = artifact.doc.mcp_servers["notes"]
    assert (server.env_vars, server.startup_timeout_sec) == (["NOTES_TOKEN"], 30.0)
    assert await started_tools(out) == (["mcp__notes__add_note"], "codex: 1 note(s), with token")


def test_import_refuses_literal_secrets_and_unknown_sources(tmp_path, capsys):
    home = tmp_path / "codex"
    shutil.copytree(CODEX.parent, home)
    config = home / "config.toml"
    config.write_text(config.read_text().replace('NOTES_LABEL = "codex"', 'API_TOKEN = "sk-1"'))
    code, stdout, err = run(capsys, "hcp", "import", "--from", "codex", config)
    assert (code, stdout) == (2, "")
    assert "mcp_servers.notes.env.API_TOKEN: a literal value for what looks like a secret" in err
    assert "sk-1" not in err
    project = tmp_path / "project"
    shutil.copytree(CLAUDE, project)
    (project / ".mcp.json").write_text(json.dumps(
        {"mcpServers": {"x": {"command": "x", "env": {"SECRET_KEY": "abc"}}}}))
    code, _, err = run(capsys, "hcp", "import", "--from", "claude", project)
    assert code == 2 and "mcpServers.x.env.SECRET_KEY: a literal value" in err
    code, _, err = run(capsys, "hcp", "import", "--from", "cursor", project)
    assert code == 2 and "--from 'cursor': give 'claude DIR', 'codex FILE' or 'mol-harness DIR'" in err
