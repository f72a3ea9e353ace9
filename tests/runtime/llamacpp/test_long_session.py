"""A long conversation on the real local engine (llama.cpp, 4,096 tokens per adapter): forty
`mol run --session` turns complete because each adapter's view is
compacted before it outgrows the window the engine reports (needs the 'local' extra)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mol.cli.main import main

pytestmark = [pytest.mark.local_engine, pytest.mark.slow]

EXAMPLES = Path(__file__).resolve().parents[3] / "hcp" / "examples"
TURNS = 40
# About 150 tokens each: with the answers and summaries, a view passes 80% of 4,096 tokens
# after fifteen to twenty turns on one adapter, so a forty-turn session must compact.
TOPICS = ["the history of tea", "a sorting function in Python", "planning a weekend trip",
          "a small shell script that counts files", "how bread rises"]


def hcp(tmp: Path) -> Path:
    """The local example, answers kept short (the test is about the views' growth, not the
    answers), no tools (the sandbox is not the subject), its store in ``tmp``."""
    text = (EXAMPLES / "local.toml").read_text()
    text = text.replace('{ path = "prompts/', '{ path = "' + str(EXAMPLES / "prompts") + "/")
    text = text.replace('tools.allow = ["terminal", "read_file", "write_file", "edit_file", '
                        '"list_dir"]', "tools.allow = []")
    for budget in ("256", "512"):
        text = text.replace(f"max_tokens = {budget} }}", "max_tokens = 48 }")
    text = text.replace("sqlite:///~/.local/state/mol/sessions.db", f"sqlite:///{tmp}/s.db")
    assert "tools.allow = []" in text and f"{tmp}/s.db" in text
    path = tmp / "long.toml"
    path.write_text(text)
    return path


def turn_text(n: int) -> str:
    topic = TOPICS[n % len(TOPICS)]
    return (f"Turn {n}. Tell me something about {topic}. " + "I would like a short answer, "
            "one or two sentences, plain words, no lists, nothing I did not ask for. " * 5)


@pytest.fixture
def engine_url() -> Iterator[str]:
    """The local engine as `mol engine local` serves it, stopped at the end."""
    with subprocess.Popen([sys.executable, "-m", "mol.cli", "engine", "local", "--port", "0"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as engine:
        try:
            yield engine.stdout.readline().strip()
        finally:
            engine.terminate()
            engine.wait(30)


def test_forty_turns_of_mol_run_session_complete_with_compaction(
        tmp_path: Path, engine_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Each turn is `mol run` as the command line runs it (in this process: forty imports of
    litellm would cost more than the turns)."""
    artifact = hcp(tmp_path)
    events: Counter[str] = Counter()
    compacted: list[dict[str, Any]] = []
    for n in range(TURNS):
        code = main(["run", "--hcp", str(artifact), "--engine-url", engine_url, "--session",
                     "long", "--json", turn_text(n)])
        out, err = capsys.readouterr()
        assert code == 0, f"turn {n}: {err[-2000:]}"
        lines = [json.loads(line) for line in out.splitlines()]
        events.update(line["type"] for line in lines)
        compacted += [line for line in lines if line["type"] == "compaction"]
        assert any(line["type"] == "answer" for line in lines), f"turn {n}: {lines}"
    assert events["answer"] == TURNS
    assert compacted, f"forty turns and no view compacted: {dict(events)}"
    assert {entry["trigger"] for entry in compacted} <= {"auto", "overflow"}
