"""Properties of the A2UI checker (issue 35): any mutation of a valid stream (a message's
keys dropped, replaced, retyped or added; lines cut, spliced, swapped; the stream as a JSON
list) is checked without an exception, and every problem names its line, inside the
stream, and (for a message's content) the JSON pointer to it."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mol.genui import toolchain
from mol.genui.a2ui import check_a2ui
from mol.genui.a2ui.schemas import load

from .conftest import bounded
from .strategies import ODD, mutate, paths_of, values

BOOKING = (Path(__file__).resolve().parents[1] / "genui" / "data" / "booking.jsonl").read_text()
MESSAGES = [json.loads(line) for line in BOOKING.splitlines() if line.strip()]
WHERE = re.compile(r"^line (\d+)(, column \d+| message \d+)?( /.*)?$", re.S)  # a pointer: any key
keys = st.one_of(st.sampled_from([
    "version", "createSurface", "updateComponents", "updateDataModel", "deleteSurface",
    "surfaceId", "catalogId", "components", "id", "component", "children", "child", "text",
    "path", "value", "action", "root"]), st.text(max_size=6), ODD)
json_values = st.one_of(values, st.sampled_from(
    ["v0.9", "v1.0", "v0.8", "root", "booking", "Text", "Column", "/form/name", "/", "~1",
     {"path": "/nowhere"}, ["root", "root"]])).filter(lambda v: v == v)


@pytest.fixture(scope="module")
def chain() -> toolchain.Toolchain:
    """The GenUI toolchain (its name gives these tests the ``genui`` marker)."""
    return toolchain.find()


@pytest.fixture(scope="module")
def schemas(chain: toolchain.Toolchain) -> Any:
    return load(chain.a2ui_schemas(), chain.a2ui_renderer())


def checked_with_located_problems(text: str, schemas: Any) -> None:
    result = check_a2ui(text, schemas)
    last = max(1, text.count("\n") + 1)
    for problem in result.problems:
        where = WHERE.match(problem.where)
        assert where, f"a problem that names no line: {problem}"
        assert 1 <= int(where.group(1)) <= last, (problem, last)
        assert problem.message.strip() and problem.rule, problem
    assert result.valid == (not result.problems)


@bounded(120)
@given(data=st.data())
def test_mutated_messages_are_checked_with_located_problems(schemas, data):
    messages = copy.deepcopy(MESSAGES)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths_of(messages)))
        action = data.draw(st.sampled_from(["drop", "replace", "retype", "add"]))
        messages = mutate(messages, path, action, data.draw(json_values), data.draw(keys))
    if not isinstance(messages, list):
        messages = [messages]
    if data.draw(st.booleans()):
        text = "\n".join(json.dumps(m) for m in messages) + "\n"
    else:
        text = json.dumps(messages, indent=data.draw(st.sampled_from([None, 2])))
    checked_with_located_problems(text, schemas)


@bounded(100)
@given(data=st.data())
def test_damaged_text_is_checked_with_located_problems(schemas, data):
    lines = BOOKING.splitlines()
    for _ in range(data.draw(st.integers(1, 3))):
        how = data.draw(st.sampled_from(["splice", "drop", "swap", "blank"]))
        at = data.draw(st.integers(0, len(lines) - 1)) if lines else 0
        if how == "splice" and lines:
            line = lines[at]
            position = data.draw(st.integers(0, len(line)))
            insert = data.draw(st.one_of(ODD, ODD, st.text(alphabet='{}[]",:\\ 0',
                                                           max_size=4)))
            lines[at] = line[:position] + insert + line[position + data.draw(
                st.integers(0, 6)):]
        elif how == "drop" and lines:
            del lines[at]
        elif how == "swap" and len(lines) > 1:
            lines[at], lines[-1] = lines[-1], lines[at]
        else:
            lines.insert(at, "")
    checked_with_located_problems("\n".join(lines), schemas)


inside_strings = st.text(st.one_of(st.sampled_from("\u2028\u2029\x85\u200b\ufeff"),
                                   st.characters(exclude_categories=("Cc", "Cs"),
                                                 exclude_characters='"\\')), max_size=5)
"""Text JSON allows raw inside a string: no control character below U+0020, no quote."""


@bounded(60)
@given(first=inside_strings, second=inside_strings)
def test_any_text_inside_a_string_keeps_a_valid_stream_valid(schemas, first, second):
    stream = BOOKING.replace("Chez Lune", f"Chez{first}Lune").replace(
        "Book a table", f"Book{second}a table")
    assert check_a2ui(stream, schemas).problems == []


def test_the_stream_the_mutations_start_from_is_valid(schemas):
    assert check_a2ui(BOOKING, schemas).valid


def test_a_line_separator_inside_a_string_is_not_a_line_break(schemas):
    """Found by the property above: U+2028 may stand raw in a JSON string (a control
    character may not); the stream's lines end at newlines only, as the answer counts them."""
    stream = BOOKING.replace("Chez Lune", "Chez\u2028Lune\u0085Café")
    assert check_a2ui(stream, schemas).valid


def test_a_component_type_that_is_a_list_is_a_problem_at_it(schemas):
    """Found by the property above: it raised TypeError (unhashable) before."""
    stream = BOOKING.replace('"component": "Column"', '"component": ["Column"]')
    wheres = [p.where for p in check_a2ui(stream, schemas).problems]
    assert "line 3 /updateComponents/components/0/component" in wheres
