"""Properties of the scripted engine's script loader (issue 35): any mutation of a valid
script, as a table or as TOML text, loads or raises ``UsageError`` whose every line names
the adapter, the rule and the field at fault (``script: L2[1].times: ...``), never another
exception."""

from __future__ import annotations

import copy
import re
import tomllib

import tomli_w
from hypothesis import given
from hypothesis import strategies as st

from mol.core.errors import UsageError
from mol.runtime.scripted.script import Script, load_script

from .conftest import bounded
from .strategies import ODD, keys, mutate, paths_of, values

VALID = tomllib.loads("""
[[L0]]
constrained = true
when = "^route"
times = -1
reply = "L2"
[[L2]]
when = "weather"
when_system = "You code"
p = 0.5
times = 2
delay = 0.01
reasoning = "thinking"
usage = { prompt_tokens = 3, completion_tokens = 4, total_tokens = 7, cached_tokens = 0 }
tool_calls = [{ name = "echo", arguments = { text = "hi" } }, { name = "raw", arguments = "{}" }]
[[L2]]
error = { status = 503, message = "busy", type = "ServiceUnavailable" }
[[L2]]
error = { kind = "context_length", limit = 100 }
[[L3]]
error = { kind = "adapter_not_loaded" }
[[L3]]
reply = "done"
""")
WHERE = re.compile(r"^script: (\d+ problems in the script:$|"
                   r"('[^']*'|\"[^\"]*\"|[^:\s'\"\[]+)(\[\d+\])?[.:]|"
                   r"expected a table of adapters|the script names no adapters|invalid TOML)")
"""The start of every line of the error: the adapter, then the rule and field when it is
one rule's problem (or the script as a whole)."""


def loads_or_names_where(source: object) -> Script | None:
    try:
        script = load_script(source)
    except UsageError as exc:
        lines = str(exc).splitlines()
        assert lines
        if lines[0].startswith("script: invalid TOML"):
            assert re.search(r"at line \d+|at end of document", str(exc)), exc
            return None
        for line in lines:
            assert WHERE.match(line), f"a problem that says nowhere: {line!r}"
        return None
    assert isinstance(script, Script)
    return script


@bounded(200)
@given(data=st.data())
def test_table_mutations_load_or_name_where(data):
    doc = copy.deepcopy(VALID)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths_of(doc)))
        action = data.draw(st.sampled_from(["drop", "replace", "retype", "add"]))
        doc = mutate(doc, path, action, data.draw(values), data.draw(keys))
    loads_or_names_where(doc)


@bounded(150)
@given(data=st.data())
def test_text_mutations_load_or_name_where(data):
    text = tomli_w.dumps(VALID)
    for _ in range(data.draw(st.integers(1, 3))):
        position = data.draw(st.integers(0, len(text)))
        cut = data.draw(st.integers(0, 6))
        insert = data.draw(st.one_of(ODD, st.text(alphabet='[]{}="\n .,-1235Lpx', max_size=5)))
        text = text[:position] + insert + text[position + cut:]
    loads_or_names_where(text)


def test_the_valid_script_loads():
    """The starting point of the mutations is itself valid (else they prove nothing)."""
    script = load_script(VALID)
    assert script.adapters == ["L0", "L2", "L3"]
