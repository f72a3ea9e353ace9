"""Strategies the property tests share: odd values and keys, and one mutation of a parsed
document (a key dropped, replaced, retyped or added)."""

from __future__ import annotations

import copy
import math

from hypothesis import strategies as st

ODD = st.sampled_from(["\u0000", "\u200b", "\ufeff", "\U0001f600", "e\u0301", "\ud7ff",
                       "\u202e", "\u2028", "\x85", "\r", "\t", "ǅ", "ﬁ", "Ⅻ", "٣"])
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
    st.text(max_size=12), ODD,
    st.sampled_from(["L0", "L4", "", "*", "prompts/chat.md", "../x", "/etc/passwd", "~"]))
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(max_size=8), inner, max_size=3), max_leaves=6)
keys = st.one_of(st.text(max_size=10), ODD, st.sampled_from(
    ["prompt", "path", "tools", "allow", "schema_version", "max_steps", "command", "url",
     "adapters", "L0", "L9", "bundles", "skills", "store"]))


def paths_of(doc: object, prefix: tuple = ()) -> list[tuple]:
    """Every key path of a parsed document, the root included."""
    found = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += paths_of(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            found += paths_of(value, (*prefix, index))
    return found


SPECIAL = st.sampled_from([math.nan, math.inf, -math.inf, 0, -1, 0.0, -0.5, 2**63 - 1,
                           "", "true", "1e9"])
"""The numbers and strings parsers forget: NaN, infinities, zero, negatives, the largest."""
toml_scalars = st.one_of(
    SPECIAL, st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(), st.text(max_size=12), ODD)
toml_values = st.recursive(
    toml_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(max_size=8), inner, max_size=3), max_leaves=6)
"""Values TOML can hold (no null)."""


def mutate(doc: object, path: tuple, action: str, value: object, key: str) -> object:
    """``doc`` (changed in place) with the value at ``path`` dropped, replaced by
    ``value``, given another TOML type, or (a table or array) given ``key = value``."""
    value = copy.deepcopy(value)  # a drawn constant is shared between examples
    if not path:
        return value if action == "replace" else doc
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last, old = path[-1], parent[path[-1]]
    if action == "drop":
        del parent[last]
    elif action == "replace":
        parent[last] = value
    elif action == "retype":  # the same value in another TOML type
        parent[last] = ([old] if not isinstance(old, list) else {"0": old[0]} if old
                        else "") if not isinstance(old, str) else [old]
    elif isinstance(old, dict):
        old[key] = value
    elif isinstance(old, list):
        old.append(value)
    return doc
