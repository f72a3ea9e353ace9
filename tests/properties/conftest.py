"""Shared pieces of the property tests (issue 35): one settings object, bounded and
reproducible, and the check that an error names where it went wrong.

``MOL_PROPERTY_EXAMPLES=N`` runs every property with N examples instead of the default
(``N=2000`` for a long hunt; the default keeps the whole folder to a few seconds of CPU).
``MOL_PROPERTY_RANDOM=1`` draws new examples each run instead of the fixed derandomized
sequence CI replays."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("MOL_PROPERTY_EXAMPLES", "0") or 0)
"""Examples per property when set; else each property's own bound."""


def bounded(examples: int, **options: object) -> settings:
    """Settings for one property: ``examples`` (or ``$MOL_PROPERTY_EXAMPLES``) examples,
    derandomized unless ``$MOL_PROPERTY_RANDOM`` is set, no per-example deadline (the
    machine is shared; a slow example is not a failure), no database of old failures."""
    return settings(max_examples=EXAMPLES or examples, deadline=None, database=None,
                    derandomize=not os.environ.get("MOL_PROPERTY_RANDOM"),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much],
                    **options)
