"""The progress display: a live line on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mol.eval.progress import Progress
from mol.eval.store import Episode

from .conftest import PASS, hcp_text, write_task


def finished(progress: Progress, outcome: str, reward: float | None = None) -> None:
    progress.finished(Episode("t", 1, "d", "h", "mol", outcome=outcome, reward=reward,
                              error="boom" if outcome == "error" else "", wall_sec=1.25))


def test_plain_lines_name_each_episode() -> None:
    out = io.StringIO()
    progress = Progress(3, stream=out, live=False)
    progress.note("building an image")
    finished(progress, "pass", 1.0)
    finished(progress, "error")
    lines = out.getvalue().splitlines()
    assert lines[0] == "[eval] building an image"
    assert lines[1].startswith("[eval] t #1: pass (reward 1; 0 steps, 1.2 s) [1/3 done, "
                               "1 passed, 0 failed, 0 errors, 0m00s elapsed, ETA ")
    assert "t #1: error (boom; " in lines[2] and "1 error," in lines[2]
    assert "\r" not in out.getvalue()


def test_a_terminal_gets_one_line_redrawn_in_place() -> None:
    out = io.StringIO()
    progress = Progress(2, stream=out, live=True)
    finished(progress, "fail", 0.0)
    progress.note("a note")
    progress.tick()
    finished(progress, "pass", 1.0)
    progress.close()
    text = out.getvalue()
    assert text.count("\r\033[K[eval] ") >= 4 and "[eval] a note\n" in text
    assert text.rstrip("\n").rsplit("\r\033[K", 1)[-1].startswith(
        "[eval] 2/2 done, 1 passed, 1 failed, 0 errors,")
    assert text.endswith("ETA 0m00s\n")


@pytest.mark.docker
def test_at_a_terminal_the_progress_is_one_line_redrawn(tmp_path: Path) -> None:
    import pty  # a real terminal for the child

    for n in range(2):
        write_task(tmp_path / "suite", f"t{n}", test=PASS, solve="true")
    hcp = tmp_path / "mol.toml"
    hcp.write_text(hcp_text())
    parent, child = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "mol.cli", "eval", "run", str(tmp_path / "suite"), "--hcp",
         str(hcp), "--agent", "oracle", "--out", str(tmp_path / "run")],
        stdin=child, stdout=subprocess.PIPE, stderr=child, close_fds=True)
    os.close(child)
    seen = b""
    while True:
        try:
            chunk = os.read(parent, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    out, _ = process.communicate(timeout=120)
    os.close(parent)
    assert process.returncode == 0
    text = seen.decode()
    assert "\r\x1b[K[eval] 2/2 done, 2 passed, 0 failed, 0 errors," in text
    assert "[eval] t0 #1: pass" not in text  # no plain per-episode lines at a terminal
    assert b"pass rate 100.0% (2/2)" in out
