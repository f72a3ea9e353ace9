"""Reading the reward a verifier wrote: reward.txt, reward.json, and what is wrong with them."""

from __future__ import annotations

import pytest

from mol.eval.verifier import parse_reward


@pytest.mark.parametrize(("listing", "reward"), [
    ("=== reward.txt\n1\n\n", 1.0),
    ("=== reward.txt\n 0.25 \n\n=== reward.json\n{\"reward\": 1}\n", 0.25),
    ("=== reward.json\n{\"reward\": 0.5, \"other\": 3}\n", 0.5),
    ("=== reward.json\n{\"accuracy\": 0.75, \"note\": \"x\"}\n", 0.75),
    ("=== reward.json\n2\n", 2.0),
    ("", None),
])
def test_rewards_are_read(listing: str, reward: float | None) -> None:
    assert parse_reward(listing) == reward


@pytest.mark.parametrize(("listing", "message"), [
    ("=== reward.txt\nabc\n", "reward.txt holds 'abc', not a number"),
    ("=== reward.txt\nnan\n", "not a finite number"),
    ("=== reward.json\n{\"a\": 1, \"b\": 2}\n", "needs a 'reward' number"),
    ("=== reward.json\n[1]\n", "reward.json holds list, not a number"),
    ("=== reward.json\n{oops\n", "reward.json is not JSON"),
])
def test_bad_rewards_say_what_is_wrong(listing: str, message: str) -> None:
    with pytest.raises(ValueError, match="reward") as caught:
        parse_reward(listing)
    assert message in str(caught.value)
