"""Properties of the HCP loader (issue 35): any mutation of a valid artifact, as a document
or as TOML text, loads or raises ``HCPError`` whose every issue says where (a key path or
a line), never another exception; a valid artifact written back with ``tomli-w`` loads to
the same digest."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path

import tomli_w
from hypothesis import given
from hypothesis import strategies as st

from mol.core.errors import HCPError
from mol.hcp.loader import Artifact, load_dict, load_text

from .conftest import bounded
from .strategies import ODD, keys, mutate, paths_of, values

EXAMPLES = Path(__file__).resolve().parents[2] / "hcp" / "examples"
SOURCES = {path.name: path.read_text(encoding="utf-8")
           for path in sorted(EXAMPLES.glob("*.toml"))}
DOCUMENTS = {name: tomllib.loads(text) for name, text in SOURCES.items()}

@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, object]:
    """(example name, a copy of its document with one to three keys dropped, replaced,
    retyped or added)."""
    name = draw(st.sampled_from(sorted(DOCUMENTS)))
    doc = copy.deepcopy(DOCUMENTS[name])
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths_of(doc)))
        action = draw(st.sampled_from(["drop", "replace", "retype", "add"]))
        doc = mutate(doc, path, action, draw(values), draw(keys))
    return name, doc


def loads_or_says_where(outcome) -> Artifact | None:
    """The artifact, or None when the load failed with an ``HCPError`` whose every issue
    names a key path or a line (the document as a whole: a message saying so)."""
    try:
        result = outcome()
    except HCPError as exc:
        assert exc.issues, "an HCPError carries at least one issue"
        for issue in exc.issues:
            assert issue.message.strip(), exc
            assert issue.path or issue.line is not None or "document" in issue.message, (
                f"an issue that says nowhere: {issue}")
        return None
    assert isinstance(result, Artifact)
    assert result.digest.startswith("sha256:")
    return result


def round_trips(artifact: Artifact, name: str) -> None:
    """Written back with tomli-w, the document loads to the same digests."""
    try:
        text = tomli_w.dumps(artifact.raw)
    except (TypeError, ValueError):  # a value TOML cannot hold (NaN in a free-form table)
        return
    again = load_text(text, base_dir=EXAMPLES, file=name)
    assert (again.digest, again.behaviour_digest) == (artifact.digest, artifact.behaviour_digest)


@bounded(150)
@given(mutated())
def test_document_mutations_load_or_name_where(case):
    name, doc = case
    artifact = loads_or_says_where(lambda: load_dict(doc, base_dir=EXAMPLES, file=name))
    if artifact is not None:
        round_trips(artifact, name)


@bounded(150)
@given(name=st.sampled_from(sorted(SOURCES)), data=st.data())
def test_text_mutations_load_or_name_where(name, data):
    text = SOURCES[name]
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(text)))
        cut = data.draw(st.integers(0, 8))
        insert = data.draw(st.one_of(ODD, st.text(alphabet='[]{}="\'\n .#,\\L0123abc',
                                                  max_size=6)))
        text = text[:position] + insert + text[position + cut:]
    if data.draw(st.booleans()):  # truncated, as a partial write leaves it
        text = text[:data.draw(st.integers(0, len(text)))]
    loads_or_says_where(lambda: load_text(text, base_dir=EXAMPLES, file=name))


@st.composite
def reordered(draw: st.DrawFn, doc: object) -> object:
    """``doc`` with the keys of every table in a drawn order (arrays keep theirs)."""
    if isinstance(doc, dict):
        order = draw(st.permutations(list(doc)))
        return {key: draw(reordered(doc[key])) for key in order}
    if isinstance(doc, list):
        return [draw(reordered(item)) for item in doc]
    return doc


@bounded(30)
@given(name=st.sampled_from(sorted(SOURCES)), data=st.data())
def test_valid_artifacts_round_trip_through_tomli_w(name, data):
    """An example, its tables in any key order, written by tomli-w (another layout, no
    comments), loads to the example's digests: they cover the document, not its text."""
    original = load_text(SOURCES[name], base_dir=EXAMPLES, file=name)
    doc = data.draw(reordered(DOCUMENTS[name]))
    again = load_text(tomli_w.dumps(doc), base_dir=EXAMPLES, file=name)
    assert again.digest == original.digest
    assert again.behaviour_digest == original.behaviour_digest


def test_an_empty_or_dotted_key_is_named_quoted():
    """Found by the property above: an unknown key ``""`` was reported at no path."""
    doc = {**copy.deepcopy(DOCUMENTS["venti.toml"]), "": 1, "a.b": 2}
    try:
        load_dict(doc, base_dir=EXAMPLES, file="venti.toml")
    except HCPError as exc:
        assert {'""', '"a.b"'} <= {issue.path for issue in exc.issues}, exc
    else:
        raise AssertionError("unknown keys must be refused")
