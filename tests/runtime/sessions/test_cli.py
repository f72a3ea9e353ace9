"""``mol run --session``, ``mol chat --session``, ``mol sessions list|show`` (in-process CLI)."""

from __future__ import annotations

import io
import json

import pytest

from mol.cli.main import main
from mol.runtime.testing import ScriptedEngine

HCP = """\
schema_version = 1
name = "cli"
[engine]
api_base = "http://127.0.0.1:9/v1"
max_retries = 0
[router]
prompt = "Route the turn."
[adapters.L0]
prompt = "You chat."
[adapters.L1]
prompt = "You act."
[adapters.L2]
prompt = "You code."
[adapters.L3]
prompt = "You draw."
[session]
store = "sqlite:///{store}"
"""

SCRIPT = """
[[L0]]
constrained = true
when = "draw"
times = -1
reply = "L3"
[[L0]]
constrained = true
times = -1
reply = "L0"
[[L0]]
constrained = false
when = "^User: "
times = -1
reply = "they talked"
[[L0]]
constrained = false
times = -1
reply = "hello back"
[[L3]]
times = -1
reply = "<Card/>"
"""


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request, tmp_path) -> str:
    """The store the CLI uses: a SQLite file, or a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    return request.getfixturevalue("postgres_url")


def test_run_and_chat_continue_a_stored_session(tmp_path, capsys, monkeypatch, store):
    hcp = tmp_path / "cli.toml"
    url = store if "://" in store else f"sqlite:///{store}"
    hcp.write_text(HCP.replace('"sqlite:///{store}"', '"{store}"').format(store=url))
    with ScriptedEngine.serve(SCRIPT) as engine:
        monkeypatch.setenv("MOL_ENGINE_URL", engine.base_url)
        assert main(["run", "--hcp", str(hcp), "--session", "work", "hello"]) == 0
        assert capsys.readouterr().out == "hello back\n"
        monkeypatch.setattr("sys.stdin", io.StringIO("please draw\n"))
        assert main(["chat", "--hcp", str(hcp), "--session", "work"]) == 0
        assert capsys.readouterr().out == "<Card/>\n"
    # L3's first view carries L0's earlier turn as a summary: the session continued.
    l3 = engine.requests_for("L3")[0]["body"]["messages"]
    assert "[L0] they talked" in l3[1]["content"]

    assert main(["sessions", "list", "--hcp", str(hcp)]) == 0
    listed = capsys.readouterr().out
    assert listed.startswith("work ") and "2 turns" in listed and "complete" in listed
    assert main(["sessions", "show", "--hcp", str(hcp), "work"]) == 0
    shown = capsys.readouterr().out
    assert "turn 1 [complete] -> L3, route 'L3'" in shown and "view L3 (4 messages)" in shown
    assert main(["sessions", "show", "--store", store, "--json", "work"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [t["adapter"] for t in data["turns"]] == ["L0", "L3"]
    assert data["turns"][1]["events"][1] == {"type": "route", "adapter": "L3", "raw": "L3",
                                             "fallback": False, "reason": "",
                                             "route": "routed"}
    assert data["turns"][0]["summary"] == "[L0] they talked"


def test_unknown_session_and_bad_ids_are_clear_errors(tmp_path, capsys):
    hcp = tmp_path / "cli.toml"
    hcp.write_text(HCP.format(store=tmp_path / "s.db"))
    assert main(["sessions", "show", "--hcp", str(hcp), "missing"]) == 2
    assert "error: no session 'missing'" in capsys.readouterr().err
    assert main(["run", "--hcp", str(hcp), "--session", "../x", "hi"]) == 2
    assert "--session '../x': use letters" in capsys.readouterr().err
