"""``mol sessions export``: a stored session's answer steps of one adapter, as the engine
received them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mol.cli.main import main
from mol.eval.exports.sessions import view_steps
from mol.runtime import Conversation
from mol.runtime.testing import ScriptedEngine

HCP = """\
schema_version = 1
name = "talk"
[engine]
api_base = "http://127.0.0.1:9/v1"
max_retries = 0
[router]
prompt = "Route the turn."
[adapters.L0]
prompt = "You chat."
[adapters.L1]
prompt = "You act."
[session]
store = "sqlite:///{store}"
"""

SCRIPT = """
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
"""


def canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8")


def test_a_stored_sessions_answer_steps_are_the_bodies_the_engine_got(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    hcp = tmp_path / "talk.toml"
    hcp.write_text(HCP.format(store=tmp_path / "s.db"))
    with ScriptedEngine.serve(SCRIPT) as engine:
        monkeypatch.setenv("MOL_ENGINE_URL", engine.base_url)
        for text in ("hello", "hello again"):
            assert main(["run", "--hcp", str(hcp), "--session", "work", text]) == 0
    # L0 answers (its own prompt first), not the route or summary requests it also serves.
    answers = [r["body"] for r in engine.requests_for("L0") if r["constraint"] is None
               and r["body"]["messages"][0]["content"].startswith("You chat.")]
    out = tmp_path / "l0.jsonl"
    capsys.readouterr()
    assert main(["sessions", "export", "--hcp", str(hcp), "work", "--adapter", "L0",
                 "--out", str(out)]) == 0
    assert "wrote 1 examples for L0" in capsys.readouterr().out
    (example,) = [json.loads(line) for line in out.read_text().splitlines()]
    last = answers[-1]
    assert canonical(example["messages"][:-1]) == canonical(last["messages"])
    assert canonical(example.get("tools")) == canonical(last.get("tools"))
    assert example["messages"][-1] == {"role": "assistant", "content": "hello back"}
    manifest = json.loads((tmp_path / "l0.manifest.json").read_text())
    assert manifest["source"]["session"] == "work" and manifest["turns"] == 2
    every = tmp_path / "every.jsonl"
    assert main(["sessions", "export", "--hcp", str(hcp), "work", "--adapter", "L0",
                 "--out", str(every), "--keep-prefixes"]) == 0
    steps = [json.loads(line) for line in every.read_text().splitlines()]
    assert [len(s["messages"]) for s in steps] == [3, 5]
    assert canonical(steps[0]["messages"][:-1]) == canonical(answers[0]["messages"])


def test_exporting_an_unknown_session_or_adapter_says_which(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    hcp = tmp_path / "talk.toml"
    hcp.write_text(HCP.format(store=tmp_path / "s.db"))
    assert main(["sessions", "export", "--hcp", str(hcp), "work", "--adapter", "L7",
                 "--out", str(tmp_path / "x.jsonl")]) != 0
    assert "--adapter L7: not an adapter of the HCP (L0, L1, L2, L3)" in capsys.readouterr().err
    assert main(["sessions", "export", "--hcp", str(hcp), "nobody", "--adapter", "L0",
                 "--out", str(tmp_path / "x.jsonl")]) != 0
    assert "nobody" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


def test_steps_after_a_compaction_are_what_the_engine_saw_then() -> None:
    conversation = Conversation()
    view = conversation.view("L2")
    view += [{"role": "system", "content": "You code."},
             {"role": "user", "content": "one"}, {"role": "assistant", "content": "1"},
             {"role": "user", "content": "two"}, {"role": "assistant", "content": "2"}]
    conversation.compact("L2", 3, "they counted")
    view += [{"role": "user", "content": "three"}, {"role": "assistant", "content": "3"}]
    steps = view_steps(conversation, "L2")
    assert steps[:2] == [view[:3], view[:5]]  # before the compaction: the view itself
    assert steps[2][0] == view[0] and "they counted" in steps[2][1]["content"]
    assert steps[2][2:] == view[3:]
