"""Checkable docs: every CLI command, plugin hook and doc link is documented and real, and
every source file the docs name exists."""

import argparse
import re
import tomllib
from pathlib import Path

from mol.cli.main import COMMANDS, build_parser
from mol.plugins import hookspecs

ROOT = Path(__file__).resolve().parents[1]


def command_paths() -> list[str]:
    paths = []
    for name in COMMANDS:
        parser = build_parser(name)
        top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        child = top.choices[name]
        nested = [a for a in child._actions if isinstance(a, argparse._SubParsersAction)]
        paths += [f"mol {name} {sub}" for sub in nested[0].choices] if nested else [f"mol {name}"]
    return paths


def test_every_command_is_documented_in_cli_md():
    text = (ROOT / "docs" / "cli.md").read_text()
    missing = [path for path in command_paths() if f"`{path}" not in text]
    assert missing == []


def test_every_hook_is_documented_in_plugins_md():
    text = (ROOT / "docs" / "plugins.md").read_text()
    hooks = [name for name in dir(hookspecs) if name.startswith("mol_")]
    assert hooks and [h for h in hooks if f"`{h}(" not in text] == []


def test_links_between_docs_resolve():
    broken = []
    for doc in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        prose = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)  # examples may link anywhere
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", prose):
            if not (doc.parent / target).exists():
                broken.append(f"{doc.name} -> {target}")
    assert broken == []


def test_the_source_files_the_docs_name_exist():
    """A module moved or split leaves no stale ``folder/module.py`` behind in the docs (the
    architecture map names hundreds)."""
    floors = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mol"]["floors"]
    folders = "|".join(folder for floor in floors for folder in floor)
    named = re.compile(rf"(?<![\w/.-])((?:{folders})/[\w/.-]+\.py)\b")
    stale = [f"{doc.name}: {path}" for doc in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
             for path in named.findall(doc.read_text()) if not (ROOT / path).exists()]
    assert stale == []
    assert named.findall("see `runtime/harness.py`") == ["runtime/harness.py"]


def test_the_attacks_security_md_names_are_tests():
    text = (ROOT / "docs" / "security.md").read_text()
    named = re.findall(r"`(tests/[\w/]+\.py)(?:::([\w*]+))?`", text)
    assert len(named) > 10
    missing = []
    for path, test in named:
        source = (ROOT / path).read_text() if (ROOT / path).exists() else ""
        pattern = (test or "").replace("*", r"\w*")
        if not source or (test and not re.search(rf"def {pattern}\(", source)):
            missing.append(f"{path}::{test}")
    assert missing == []
