"""The progress display: a live line on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io

from mol.eval.progress import Progress
from mol.eval.store import Episode


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
