"""How much of its window a request fills (mol.runtime.windows.estimate)."""

from __future__ import annotations

import math
from pathlib import Path

import anyio

from mol.hcp.loader import load_text
from mol.runtime.windows import CHARS_PER_TOKEN, SMALL_REQUEST, Measure, Windows, chars, estimate

from .conftest import hcp_text

VIEW = [{"role": "system", "content": "You are L0." * 20}] + [
    {"role": role, "content": f"message {n} " * 40}
    for n, role in enumerate(["user", "assistant"] * 4)]


def test_without_a_measure_the_cautious_rate_counts():
    assert estimate(VIEW, None, None, 0) == math.ceil(chars(VIEW) / CHARS_PER_TOKEN)


def test_new_messages_count_at_the_measured_rate_on_top_of_the_measure():
    measure = Measure(tokens=500, messages=6, chars=2500, compactions=0)  # 5 chars a token
    assert estimate(VIEW, None, measure, 0) == 500 + math.ceil(chars(VIEW[6:]) / 5)


def test_a_part_of_what_was_measured_counts_at_the_measured_rate():
    """What a compaction summarizes is the older part of the last request: at 3 characters a
    token it would seem a half larger than it is, too large for the adapter to summarize it
    on its own cached prefix."""
    measure = Measure(tokens=700, messages=9, chars=3500, compactions=0)
    old = VIEW[:5]
    assert estimate(old, None, measure, 0) == math.ceil(chars(old) / 5)
    assert estimate(old, None, measure, 0) < estimate(old, None, None, 0) / 1.5


def test_a_measure_from_before_a_compaction_does_not_count():
    measure = Measure(tokens=700, messages=9, chars=3500, compactions=0)
    assert estimate(VIEW[:5], None, measure, 1) == estimate(VIEW[:5], None, None, 1)


class Listing:
    """An engine that reports L0's window, counting how often it is asked."""

    def __init__(self) -> None:
        self.asked = 0

    async def models(self) -> list[dict]:
        self.asked += 1
        return [{"id": "L0", "max_model_len": 2048}]


def test_a_small_request_does_not_ask_the_engine_for_the_window(tmp_path: Path):
    """A short conversation (a one-turn mol run) costs no model-list request of its own (at
    most one in all: the adapter check's at the start, whose list serves the windows too);
    the first request of SMALL_REQUEST tokens asks, once; a window the artifact sets is
    never asked."""
    engine = Listing()
    windows = Windows(load_text(hcp_text("[adapters.L0]\nprompt = \"x\"\n"), tmp_path), engine)
    assert windows.unasked("L0", SMALL_REQUEST - 1)
    assert not windows.unasked("L0", SMALL_REQUEST)
    assert anyio.run(windows.of, "L0") == 2048 and anyio.run(windows.of, "L0") == 2048
    assert engine.asked == 1
    assert not windows.unasked("L0", 10)  # once asked, the window counts for every request
    sized = Windows(load_text(hcp_text("[adapters.L0]\nprompt = \"x\"\ncontext_window = 512\n"),
                              tmp_path), Listing())
    assert not sized.unasked("L0", 10) and anyio.run(sized.of, "L0") == 512
    assert sized.engine.asked == 0
    checked = Windows(load_text(hcp_text("[adapters.L0]\nprompt = \"x\"\n"), tmp_path),
                      Listing())
    checked.report([{"id": "L0", "max_model_len": 4096}])  # the adapter check's list
    assert not checked.unasked("L0", 10) and anyio.run(checked.of, "L0") == 4096
    assert anyio.run(checked.known, "L0") and checked.engine.asked == 0
