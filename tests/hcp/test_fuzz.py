"""Property: any mutation of a valid artifact loads or raises HCPError, never anything else."""

import copy
import shutil
import tomllib
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mol.core.errors import HCPError
from mol.hcp.loader import Artifact, load_dict, load_text

EXAMPLES = Path(__file__).resolve().parents[2] / "hcp" / "examples"
VENTI_TEXT = (EXAMPLES / "venti.toml").read_text()
VENTI = tomllib.loads(VENTI_TEXT)

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
    st.text(max_size=12), st.sampled_from(["L0", "L4", "", "*", "prompts/chat.md", "../x"]),
)
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(max_size=8), inner, max_size=3), max_leaves=6)
keys = st.one_of(st.text(max_size=10), st.sampled_from(
    ["prompt", "path", "tools", "allow", "schema_version", "max_steps", "command", "url"]))


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from _paths(value, (*prefix, index))


ALL_PATHS = list(_paths(VENTI))


def _mutate(doc, path, action, value, key):
    doc = copy.deepcopy(doc)
    if not path:
        return value if action == "replace" else doc
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if action == "delete":
        del parent[last]
    elif action == "replace":
        parent[last] = value
    elif isinstance(parent[last], dict):
        parent[last][key] = value
    elif isinstance(parent[last], list):
        parent[last].append(value)
    return doc


def _check(outcome):
    try:
        result = outcome()
    except HCPError as exc:
        assert exc.issues, "an HCPError must carry at least one issue"
        assert all(str(issue) for issue in exc.issues)
        return
    assert isinstance(result, Artifact)
    assert result.digest.startswith("sha256:")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(ALL_PATHS), action=st.sampled_from(["delete", "replace", "add"]),
       value=values, key=keys)
def test_document_mutations(path, action, value, key):
    mutated = _mutate(VENTI, path, action, value, key)
    _check(lambda: load_dict(mutated, base_dir=EXAMPLES, file="venti.toml"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_text_mutations(data):
    text = VENTI_TEXT
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(text)))
        cut = data.draw(st.integers(0, 8))
        insert = data.draw(st.text(alphabet='[]{}="\n .#,\\L0123abc', max_size=6))
        text = text[:position] + insert + text[position + cut:]
    _check(lambda: load_text(text, base_dir=EXAMPLES, file="venti.toml"))


def test_a_referenced_path_that_is_a_folder_is_an_error(tmp_path):
    shutil.copytree(EXAMPLES, tmp_path / "ex")
    (tmp_path / "ex" / "prompts" / "route.md").unlink()
    (tmp_path / "ex" / "prompts" / "route.md").mkdir()
    try:
        load_text(VENTI_TEXT, base_dir=tmp_path / "ex", file="venti.toml")
    except HCPError as exc:
        assert "router.prompt.path: file not found: prompts/route.md" in str(exc)
    else:
        raise AssertionError("a folder in place of a prompt file must be refused")
