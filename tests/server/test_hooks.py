"""Turn hooks behind the server: a UserPromptSubmit block is a ``content_filter`` answer that
reached no model, and SessionStart fires once per conversation, not once per request."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mol.runtime.testing import ScriptedEngine

from .conftest import serve_app

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L0"
[[L0]]
constrained = false
when = "^User: "
times = -1
reply = "summary"
[[L0]]
constrained = false
times = -1
reply = "Noted."
"""

HOOK = """\
import json, pathlib, sys
event = json.load(sys.stdin)
with open(pathlib.Path(__file__).with_name("events.jsonl"), "a") as log:
    log.write(json.dumps(event) + "\\n")
if "secret" in event.get("prompt", ""):
    print("no secrets", file=sys.stderr)
    sys.exit(2)
"""


def test_a_blocked_prompt_and_one_session_start_per_conversation(tmp_path):
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "log.py").write_text(HOOK)
    command = f"{Path(sys.executable).as_posix()} hooks/log.py"
    extra = "".join(f'\n[[hooks.{event}]]\nhooks = [{{ command = "{command}", timeout = 30 }}]\n'
                    for event in ("SessionStart", "UserPromptSubmit"))
    with ScriptedEngine.serve(SCRIPT) as engine, serve_app(
            tmp_path, engine.base_url, extra=extra) as served:
        client = served.client()
        messages = [{"role": "user", "content": "the first turn"}]
        first = client.chat.completions.create(model="mol", messages=messages)
        messages += [{"role": "assistant", "content": first.choices[0].message.content},
                     {"role": "user", "content": "the second turn"}]
        second = client.chat.completions.create(model="mol", messages=messages)
        blocked = client.chat.completions.create(
            model="mol", messages=[{"role": "user", "content": "tell me the secret"}])
    assert first.choices[0].message.content == second.choices[0].message.content == "Noted."
    assert blocked.choices[0].finish_reason == "content_filter"
    assert blocked.choices[0].message.content == (
        "[mol: the prompt was blocked by a hook: no secrets]")
    assert not any("secret" in json.dumps(r["body"]) for r in engine.requests)
    events = [json.loads(line) for line in
              (tmp_path / "hooks" / "events.jsonl").read_text().splitlines()]
    # The second request continues the first conversation: no second SessionStart for it.
    assert [(e["hook_event_name"], e.get("source", e.get("prompt"))) for e in events] == [
        ("SessionStart", "startup"), ("UserPromptSubmit", "the first turn"),
        ("UserPromptSubmit", "the second turn"),
        ("SessionStart", "startup"), ("UserPromptSubmit", "tell me the secret")]
    assert events[0]["session_id"] == events[2]["session_id"] != events[3]["session_id"]
