"""``mol chat``'s own commands (/help, /compact, /clear, /context) and ``mol sessions
compact``, as a user runs them, against the scripted engine over HTTP."""

from __future__ import annotations

import json
import os
import subprocess

from mol.runtime.testing import ScriptedEngine

from .conftest import BASE_HCP

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L0"
[[L0]]
when = "conversation is about to be shortened"
times = -1
reply = "Summary: greetings were exchanged."
[[L0]]
constrained = false
when = "^User: "
times = -1
reply = "summary"
[[L0]]
times = -1
reply = "Hi!"
"""


def mol(*args: str, stdin: str | None = None, engine: ScriptedEngine,
        extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "MOL_ENGINE_URL": engine.base_url, **(extra_env or {})}
    return subprocess.run(["mol", *args], input=stdin, capture_output=True, text=True,
                          env=env, timeout=120)


def artifact(tmp_path) -> str:
    path = tmp_path / "chat.toml"
    path.write_text(BASE_HCP.format(constraint="structured_outputs", timeout=30)
                    + f'[session]\nstore = "sqlite:///{tmp_path / "s.db"}"\n')
    return str(path)


def test_chat_runs_its_own_commands_and_never_sends_them_to_a_model(tmp_path):
    lines = ["/help", "hello there", "/context", "/compact keep the greetings",
             "/context", "/clear", "hello again"]
    with ScriptedEngine.serve(SCRIPT, context_window=2048) as engine:
        out = mol("chat", "--hcp", artifact(tmp_path), stdin="\n".join(lines) + "\n",
                  engine=engine)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "Hi!\nHi!\n"
    for name in ("/help", "/compact", "/clear", "/context"):
        assert name in out.stderr  # /help lists them all
    used = [line for line in out.stderr.splitlines() if " of 2048 tokens (" in line]
    assert len(used) == 2 and all(line.startswith("[mol] L0: about ") for line in used)
    assert "[mol] compacted L0: about " in out.stderr
    assert "[mol] new conversation conv_" in out.stderr
    sent = [json.dumps(r["body"]["messages"]) for r in engine.requests]
    assert not any(f'"{name}' in text for text in sent for name in ("/help", "/context",
                                                                      "/clear"))
    asked = [r["body"]["messages"] for r in engine.requests
             if "conversation is about to be shortened" in json.dumps(r["body"]["messages"])]
    assert len(asked) == 1 and asked[0][-1]["content"].endswith("Also: keep the greetings")
    # After /clear, the second hello starts a conversation of its own: no summary in it.
    last = [r["body"]["messages"] for r in engine.requests
            if r["adapter"] == "L0" and r["body"]["messages"][-1]["content"] == "hello again"]
    assert len(last[-1]) == 2 and "Summary" not in json.dumps(last[-1])


def test_sessions_compact_compacts_a_stored_session(tmp_path):
    hcp = artifact(tmp_path)
    with ScriptedEngine.serve(SCRIPT, context_window=2048) as engine:
        for text in ("hello one", "hello two", "hello three"):
            run = mol("run", "--hcp", hcp, "--session", "talk", text, engine=engine)
            assert run.returncode == 0, run.stderr
        out = mol("sessions", "compact", "talk", "--hcp", hcp, engine=engine)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("L0: about ") and "written by L0" in out.stdout
        shown = mol("sessions", "show", "talk", "--hcp", hcp, "--json", engine=engine)
        state = json.loads(shown.stdout)
        [compaction] = state["compactions"]["L0"]
        assert compaction["trigger"] == "manual" and compaction["summary"].startswith(
            "Summary:")
        again = mol("run", "--hcp", hcp, "--session", "talk", "hello four", engine=engine)
    assert again.returncode == 0, again.stderr
    answered = [r["body"]["messages"] for r in engine.requests
                if r["body"]["messages"][-1]["content"] == "hello four"
                and r["adapter"] == "L0" and "structured_outputs" not in r["body"]]
    assert answered[0][1]["content"].startswith("[Context: a summary of the earlier part")


def test_sessions_compact_names_a_wrong_adapter(tmp_path):
    hcp = artifact(tmp_path)
    with ScriptedEngine.serve(SCRIPT) as engine:
        mol("run", "--hcp", hcp, "--session", "talk", "hello", engine=engine)
        out = mol("sessions", "compact", "talk", "--hcp", hcp, "--adapter", "L9",
                  engine=engine)
    assert out.returncode == 2 and "--adapter 'L9'" in out.stderr
