"""Properties of the Harbor task-folder loader (issue 35): any mutation of a valid
``task.toml`` (as a table or as text), and any damage to a task folder (a file missing,
not UTF-8, empty), loads or raises ``TaskError`` naming the task and the file or key at
fault, never another exception; what loads has positive, finite limits."""

from __future__ import annotations

import copy
import math
import re
import tempfile
import tomllib
from pathlib import Path

import tomli_w
from hypothesis import assume, given
from hypothesis import strategies as st

from mol.core.errors import TaskError
from mol.eval.tasks import TaskConfig, load_task, parse_config

from .conftest import bounded
from .strategies import ODD, SPECIAL, mutate, paths_of, toml_scalars, toml_values

VALID_TEXT = """
version = "1.0"
[metadata]
tags = ["guard"]
author_name = "x"
[agent]
timeout_sec = 30
[verifier]
timeout_sec = 12.5
pass_threshold = 0.5
[environment]
build_timeout_sec = 100
cpus = 2
memory_mb = 1024
storage_mb = 2048
allow_internet = true
"""
VALID = tomllib.loads(VALID_TEXT)
WHERE = "task t: task.toml"
NAMED = re.compile(r"^task t: task\.toml: (invalid TOML: .*(line \d+|end of document)|"
                   r"\[\w+\] \w+ must be .*|\[metadata\] must be a table)", re.S)
keys = st.one_of(st.sampled_from(["timeout_sec", "pass_threshold", "cpus", "memory_mb",
                                  "storage_mb", "allow_internet", "build_timeout_sec",
                                  "tags", "agent", "verifier", "environment", "metadata"]),
                 st.text(max_size=8), ODD)


def parses_or_names_where(text: str) -> TaskConfig | None:
    try:
        config = parse_config(text, WHERE)
    except TaskError as exc:
        assert NAMED.match(str(exc)), f"a task error that says nowhere: {exc}"
        return None
    for limit in (config.agent_timeout, config.verifier_timeout, config.build_timeout,
                  config.cpus or 1, config.memory_mb or 1, config.storage_mb or 1):
        assert math.isfinite(limit) and limit > 0, config
    assert math.isfinite(config.pass_threshold), config
    return config


@bounded(200)
@given(data=st.data())
def test_table_mutations_parse_or_name_where(data):
    doc = copy.deepcopy(VALID)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths_of(doc)))
        action = data.draw(st.sampled_from(["drop", "replace", "retype", "add"]))
        doc = mutate(doc, path, action, data.draw(toml_values), data.draw(keys))
    assume(isinstance(doc, dict))
    parses_or_names_where(tomli_w.dumps(doc))


LEAVES = [(section, key) for section, table in VALID.items() if isinstance(table, dict)
          for key in table]


@bounded(100)
@given(leaf=st.sampled_from(LEAVES), value=st.one_of(SPECIAL, toml_scalars))
def test_any_value_of_a_known_key_parses_or_names_the_key(leaf, value):
    """Each field read, given any TOML value: NaN, infinities, zero, the wrong type."""
    doc = copy.deepcopy(VALID)
    doc[leaf[0]][leaf[1]] = value
    config = parses_or_names_where(tomli_w.dumps(doc))
    if config is None:
        with_key = re.escape(f"[{leaf[0]}] {leaf[1]}")
        assert re.search(with_key, str(_error(doc))), (leaf, value)


def _error(doc: dict) -> TaskError | None:
    try:
        parse_config(tomli_w.dumps(doc), WHERE)
    except TaskError as exc:
        return exc
    return None


@bounded(150)
@given(data=st.data())
def test_text_mutations_parse_or_name_where(data):
    text = VALID_TEXT
    for _ in range(data.draw(st.integers(1, 3))):
        position = data.draw(st.integers(0, len(text)))
        cut = data.draw(st.integers(0, 6))
        insert = data.draw(st.one_of(ODD, st.sampled_from(["nan", "inf", "-0", "1e400"]),
                                     st.text(alphabet='[]{}="\n .,-1205abt', max_size=5)))
        text = text[:position] + insert + text[position + cut:]
    parses_or_names_where(text)


FILES = {"task.toml": VALID_TEXT.encode(), "instruction.md": b"Say hi.\n",
         "tests/test.sh": b"#!/bin/sh\nexit 0\n"}
DAMAGE = st.sampled_from(["missing", "not-utf8", "empty", "blank", "folder", "fine"])


@bounded(60)
@given(damage=st.fixed_dictionaries({name: DAMAGE for name in FILES}))
def test_damaged_task_folders_load_or_name_the_file(damage):
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp) / "t"
        for name, content in FILES.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            how = damage[name]
            if how == "folder":
                path.mkdir()
            elif how != "missing":
                path.write_bytes({"not-utf8": b"\xff\xfe" + content, "empty": b"",
                                  "blank": b" \n\t\n"}.get(how, content))
        try:
            task = load_task(folder)
        except TaskError as exc:
            message = str(exc)
            assert message.startswith("task t: "), message
            assert any(name in message for name in FILES) or "UTF-8" in message, message
            return
        assert task.instruction.strip() and task.name == "t"


def test_nan_and_infinite_limits_are_refused_at_their_key():
    """Found by the properties above: ``timeout_sec = nan`` was taken (no comparison holds)."""
    for value in ("nan", "inf", "-inf"):
        try:
            parse_config(f"[agent]\ntimeout_sec = {value}\n", WHERE)
        except TaskError as exc:
            assert "[agent] timeout_sec must be a finite number" in str(exc)
        else:
            raise AssertionError(value)
