"""The progress of a run: one live status line on a terminal, plain lines otherwise.

On a terminal the line is redrawn in place (``\\r``) at every finished episode and every
second: done of total, passed, failed, errors, elapsed time and an ETA from the mean pace
so far. Anywhere else (a pipe, a log file, CI) each finished episode is one line, so logs
stay readable. Notes (image builds, ignored ``task.toml`` keys) are lines in both cases.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

from mol.eval.store import Episode


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m{rest % 60:02d}s" if hours else \
        f"{rest // 60}m{rest % 60:02d}s"


class Progress:
    """Counts finished episodes and shows them on ``stream`` (stderr by default)."""

    def __init__(self, total: int, *, stream: TextIO | None = None,
                 live: bool | None = None, quiet: bool = False) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.quiet = quiet
        self.counts = {"pass": 0, "fail": 0, "error": 0}
        self.started = time.monotonic()
        self._lock = threading.Lock()  # notes may come from image-build threads
        self._drawn = False

    @property
    def done(self) -> int:
        """Episodes finished so far in this run."""
        return sum(self.counts.values())

    def status(self) -> str:
        """``12/40 done, 9 passed, 2 failed, 1 error, 1m02s elapsed, ETA 2m10s``."""
        elapsed = time.monotonic() - self.started
        done = self.done
        eta = "ETA --" if not done else \
            f"ETA {_clock(elapsed / done * (self.total - done))}"
        errors = self.counts["error"]
        return (f"{done}/{self.total} done, {self.counts['pass']} passed, "
                f"{self.counts['fail']} failed, {errors} error{'s' * (errors != 1)}, "
                f"{_clock(elapsed)} elapsed, {eta}")

    def note(self, line: str) -> None:
        """A line that stays (above the live line on a terminal)."""
        if self.quiet:
            return
        with self._lock:
            self._clear()
            print(f"[eval] {line}", file=self.stream, flush=True)
            self._draw()

    def finished(self, episode: Episode) -> None:
        """Count one finished episode and show it."""
        self.counts[episode.outcome] = self.counts.get(episode.outcome, 0) + 1
        if self.quiet:
            return
        if not self.live:
            detail = f"reward {episode.reward:g}" if episode.reward is not None else \
                (episode.error or episode.reason)
            print(f"[eval] {episode.task} #{episode.epoch}: {episode.outcome} ({detail[:160]}; "
                  f"{episode.steps} steps, {episode.wall_sec:.1f} s) [{self.status()}]",
                  file=self.stream, flush=True)
            return
        with self._lock:
            self._draw()

    def tick(self) -> None:
        """Redraw the live line (called every second on a terminal)."""
        if self.live and not self.quiet:
            with self._lock:
                self._draw()

    def close(self) -> None:
        """End the live line."""
        if self.live and not self.quiet and self._drawn:
            with self._lock:
                self._draw()
                print(file=self.stream, flush=True)
                self._drawn = False

    def _clear(self) -> None:
        if self.live and self._drawn:
            self.stream.write("\r\033[K")

    def _draw(self) -> None:
        if self.live:
            self.stream.write(f"\r\033[K[eval] {self.status()}")
            self.stream.flush()
            self._drawn = True


async def ticking(progress: Progress, *, task_status: Any = None) -> None:
    """Redraw ``progress`` every second until cancelled."""
    import anyio

    if task_status is not None:
        task_status.started()
    while True:
        await anyio.sleep(1)
        progress.tick()
