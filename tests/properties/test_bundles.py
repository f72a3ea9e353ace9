"""Properties of plugin bundles (issue 35): any mutation of a valid bundle's manifest
(``.claude-plugin/plugin.json``), ``hooks/hooks.json`` or ``.mcp.json``, as JSON or as
text, loads or gives problems that each name the file or folder at fault, never an
exception; through the HCP loader, ``HCPError`` issues at ``bundles.paths``; Claude Code's
hooks objects translate with every problem under the ``where`` they were given."""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from mol.core.errors import HCPError
from mol.hcp import bundles, claude
from mol.hcp.loader import load_text
from mol.hcp.sections import HooksConfig
from tests.conftest import hcp_text

from .conftest import bounded
from .strategies import ODD, mutate, paths_of, values

DEMO = Path(__file__).resolve().parents[1] / "hcp" / "fixtures" / "demo-plugin"
FILES = (".claude-plugin/plugin.json", "hooks/hooks.json", ".mcp.json")
ORIGINALS = {name: (DEMO / name).read_text(encoding="utf-8") for name in FILES}
keys = st.one_of(st.sampled_from([
    "name", "skills", "commands", "hooks", "mcpServers", "agents", "PreToolUse", "Stop",
    "matcher", "type", "command", "timeout", "args", "env", "url", "headers", "cwd",
    "Authorization", "API_KEY"]), st.text(max_size=8), ODD)
strings = st.sampled_from(["../outside", "/etc", "./mirror/", "commands/review.md",
                           "${CLAUDE_PLUGIN_ROOT}/x.py", "${SECRET}", "sk-live-1234", "a__b",
                           "demo", "demo_", "", "*", "Bash(ls:*)"])
json_values = st.one_of(values, strings).filter(lambda v: v == v)  # JSON has no NaN


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    """A scratch copy of the demo bundle (symlinks kept), its files rewritten per example."""
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp) / "demo-plugin"
        shutil.copytree(DEMO, root, symlinks=True)
        yield root


def written(root: Path, contents: dict[str, str | None]) -> None:
    for name in FILES:
        path = root / name
        text = contents.get(name, ORIGINALS[name])
        if text is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(text, encoding="utf-8")


@st.composite
def damaged(draw: st.DrawFn) -> dict[str, str | None]:
    """New contents for one or two of the bundle's JSON files: mutated JSON, text cut or
    spliced, or the file missing."""
    out: dict[str, str | None] = {}
    for name in draw(st.lists(st.sampled_from(FILES), min_size=1, max_size=2, unique=True)):
        how = draw(st.sampled_from(["json", "json", "json", "text", "missing"]))
        if how == "missing":
            out[name] = None
            continue
        if how == "text":
            text = ORIGINALS[name]
            at = draw(st.integers(0, len(text)))
            splice = draw(st.one_of(ODD, st.text(alphabet='{}[]",:\\ ', max_size=4)))
            out[name] = text[:at] + splice + text[at + draw(st.integers(0, 5)):]
            continue
        doc = json.loads(ORIGINALS[name])
        for _ in range(draw(st.integers(1, 3))):
            path = draw(st.sampled_from(paths_of(doc)))
            action = draw(st.sampled_from(["drop", "replace", "retype", "add"]))
            doc = mutate(copy.deepcopy(doc), path, action, draw(json_values), draw(keys))
        out[name] = json.dumps(doc)
    return out


@bounded(120)
@given(contents=damaged())
def test_damaged_bundles_load_or_name_the_file(folder, contents):
    written(folder, contents)
    try:
        bundle, problems = bundles.load(str(folder), folder.parent)
    finally:
        written(folder, {})
    for problem in problems:
        assert problem.startswith(str(folder)), f"a problem that names no file: {problem}"
    if bundle is not None and not problems:
        assert bundle.name and bundle.folder == folder


@bounded(40)
@given(contents=damaged())
def test_through_the_loader_issues_are_at_the_bundle_path(folder, contents):
    written(folder, contents)
    text = hcp_text(f'[bundles]\npaths = [{json.dumps(str(folder))}]\n'
                    '[adapters.L2]\nbundles = ["demo"]\n')
    try:
        load_text(text, base_dir=folder.parent, file="mol.toml")
    except HCPError as exc:
        for issue in exc.issues:
            assert issue.path or issue.line is not None, f"an issue at no key: {issue}"
    finally:
        written(folder, {})


HOOKS = json.loads(ORIGINALS["hooks/hooks.json"])
HERE = {"CLAUDE_PLUGIN_ROOT": ".", "CLAUDE_PROJECT_DIR": ".."}


@bounded(200)
@given(data=st.data())
def test_hooks_objects_translate_with_problems_where_they_were_given(data):
    doc = copy.deepcopy(HOOKS) if data.draw(st.booleans()) else copy.deepcopy(HOOKS["hooks"])
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths_of(doc)))
        action = data.draw(st.sampled_from(["drop", "replace", "retype", "add"]))
        doc = mutate(doc, path, action, data.draw(json_values), data.draw(keys))
    out = claude.hooks_config(doc, "HOOKS", HERE)
    for line in out.problems + out.notes:
        assert line.startswith("HOOKS: "), line
    assert set(out.value) <= set(claude.SUPPORTED_EVENTS)
    try:  # what the bundle then validates (a failure: a problem at its loc, bundles.py)
        HooksConfig.model_validate(out.value)
    except ValidationError as exc:
        assert all(error["loc"] for error in exc.errors()), exc


def test_a_matcher_whose_hooks_are_not_a_list_is_a_problem():
    """Found by the property above: an unsupported event's count raised TypeError."""
    out = claude.hooks_config({"Notification": [{"hooks": 1}], "PreToolUse": [{"hooks": 1}]},
                              "HOOKS", HERE)
    assert out.problems == ["HOOKS: hooks.PreToolUse[0]: must be an object with a list of hooks"]
