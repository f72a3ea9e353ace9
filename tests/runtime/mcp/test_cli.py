"""``mol mcp``: list, call, resources, prompts; exit codes; no server survives mol."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mol.cli.main import main

from .conftest import artifact_text, children, group_members, stdio_server

MOL = [sys.executable, "-m", "mol.cli"]


@pytest.fixture
def hcp(tmp_path: Path, call_log: Path) -> Path:
    path = tmp_path / "mol.toml"
    path.write_text(artifact_text({"s": stdio_server(tool_timeout_sec=20)}))
    return path


def mol(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """Run ``mol mcp ARGS`` in this process: (exit code, stdout, stderr)."""
    code = main(["mcp", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_status_tools_and_a_failed_required_server(tmp_path, capsys):
    path = tmp_path / "mol.toml"
    path.write_text(artifact_text({"s": stdio_server(enabled_tools=["echo", "add"]),
                                   "broken": stdio_server("--crash", required=True)}))
    code, out, err = mol(capsys, "list", "--hcp", str(path))
    assert code == 1, err
    assert "s: ready (stdio, 2026-07-28, pid " in out
    assert "  mcp__s__add\n  mcp__s__echo\n" in out
    assert "broken: failed (stdio, required)" in out
    assert "configuration file missing" in out
    assert "starting 2 MCP server(s)" in err


def test_call_prints_the_result_and_sets_the_exit_code(hcp, capsys):
    code, out, err = mol(capsys, "call", "--hcp", str(hcp), "mcp__s__add", '{"a": 40, "b": 2}')
    assert (code, out) == (0, "42\n"), err
    code, out, _ = mol(capsys, "call", "--hcp", str(hcp), "mcp__s__fail", '{"message": "no disk"}')
    assert code == 1 and "no disk" in out


def test_bad_arguments_exit_2_naming_the_problem(hcp, capsys):
    code, _, err = mol(capsys, "call", "--hcp", str(hcp), "mcp__s__add", '{"a": 1,')
    assert code == 2
    assert "error: JSON_ARGS is not valid JSON: Expecting property name" in err
    assert "Traceback" not in err
    code, _, err = mol(capsys, "call", "--hcp", str(hcp), "mcp__s__add", "[1, 2]")
    assert code == 2 and "must be a JSON object, got list" in err
    code, _, err = mol(capsys, "call", "--hcp", str(hcp), "mcp__s__add", '{"a": "x", "b": 1}')
    assert code == 2 and "mcp__s__add: invalid arguments: a: \"x\" is not of type \"integer\"" in err


def test_resources_and_prompts(hcp, capsys):
    code, out, _ = mol(capsys, "resources", "--hcp", str(hcp))
    assert code == 0 and "s  memo://readme  readme [text/plain]" in out
    code, out, _ = mol(capsys, "prompts", "--hcp", str(hcp))
    assert code == 0 and "s  greet(name): Greet someone." in out



def test_no_server_survives_mol_even_when_interrupted(hcp, call_log):
    proc = subprocess.Popen([*MOL, "mcp", "call", "--hcp", str(hcp), "mcp__s__hang", "{}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while "call hang" not in call_log.read_text():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        servers = children(proc.pid)
        assert servers and all(group_members(pid) for pid in servers)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130
    finally:
        proc.kill()
        proc.communicate()
    assert [group_members(pid) for pid in servers] == [[] for _ in servers]
