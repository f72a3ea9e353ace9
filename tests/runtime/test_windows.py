"""How much of its window a request fills (mol.runtime.windows.estimate)."""

from __future__ import annotations

import math

from mol.runtime.windows import CHARS_PER_TOKEN, Measure, chars, estimate

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
