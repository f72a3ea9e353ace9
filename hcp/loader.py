"""Load an HCP artifact: TOML -> ``schema_version`` migrations -> validation -> files -> digest.

Every problem is collected and raised together as one ``HCPError``; each
names the file, the line when known, the key path and, for a typo, the
closest valid key.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mol.hcp import files as hcp_files
from mol.hcp.digest import digest_value
from mol.hcp.issues import Issue, format_path
from mol.hcp.locate import key_lines, line_of
from mol.hcp.migrations import migrate
from mol.hcp.schema import ADAPTERS, HCP, SCHEMA_VERSION, FileRef
from mol.hcp.types import model_at
from mol.runtime.errors import HCPError


@dataclass(frozen=True)
class Artifact:
    """A validated HCP artifact with its referenced files and its digest."""

    doc: HCP
    """The validated document."""
    raw: dict
    """The migrated document as written (file references as paths)."""
    base_dir: Path
    """Folder that relative file references resolve against."""
    path: Path | None = None
    """The TOML file, when loaded from one."""
    files: dict[str, str] = field(default_factory=dict)
    """Referenced file or folder (as written) -> its digest."""
    texts: dict[str, str] = field(default_factory=dict)
    """Prompt file (as written) -> its text, read once at load time."""
    skills: dict[str, Any] = field(default_factory=dict)
    """Skill name -> ``mol.skills.Skill`` for every skill of the sources, read once at load time."""
    skill_digests: dict[str, str] = field(default_factory=dict)
    """Skill name -> folder digest, for the skills the adapters use (they enter the digest)."""
    bundles: dict[str, Any] = field(default_factory=dict)
    """Bundle name -> ``mol.hcp.bundles.Bundle`` for every folder of ``[bundles] paths``."""
    commands: dict[str, Any] = field(default_factory=dict)
    """Slash command (``name`` and ``bundle:name``) -> ``mol.hcp.slash.SlashCommand``, for
    the bundles some adapter uses."""
    warnings: tuple[str, ...] = ()
    """What loaded but is worth saying: skills beyond the spec's limits, what a bundle holds
    that mol does not run."""
    digest: str = ""
    """``sha256:<hex>`` over the canonical document with files replaced by their digests."""

    @property
    def name(self) -> str:
        """The artifact's ``name``."""
        return self.doc.name

    def resolve(self, relative: str) -> Path:
        """Absolute path of a file reference."""
        return hcp_files.resolve(self.base_dir, relative)

    def prompt_text(self, prompt: str | FileRef | None) -> str:
        """The text of a prompt: inline text, or the file's text as it was at load time."""
        if prompt is None:
            return ""
        if isinstance(prompt, FileRef):
            return self.texts[prompt.path]
        return prompt


def load(path: str | Path) -> Artifact:
    """Load and validate the artifact at ``path``."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise HCPError([Issue(f"cannot read file: {exc.strerror or exc}", file=str(path))]) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HCPError([Issue(f"not UTF-8 text (byte {exc.start})", file=str(path))]) from exc
    return load_text(text, base_dir=path.resolve().parent, file=str(path), path=path)


def load_text(
    text: str, base_dir: Path, file: str | None = None, path: Path | None = None
) -> Artifact:
    """Load and validate artifact TOML ``text`` whose files live under ``base_dir``."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # Python < 3.14 only puts the position in the message: "... (at line 3, column 8)".
        message = str(exc)
        where = re.search(r"\(at line (\d+), column (\d+)\)$", message)
        line = int(where.group(1)) if where else None
        if where:
            message = f"{message[: where.start()].rstrip()} (column {where.group(2)})"
        raise HCPError([Issue(f"TOML syntax error: {message}", file=file, line=line)]) from None
    return load_dict(raw, base_dir=base_dir, file=file, source=text, path=path)


def load_dict(
    raw: dict,
    base_dir: Path,
    file: str | None = None,
    source: str | None = None,
    path: Path | None = None,
) -> Artifact:
    """Validate an already-parsed document (as from TOML) against the schema and its files.

    ``Artifact.doc`` is the document with its bundles merged into the adapters that use
    them (``mol.hcp.expand``); ``Artifact.raw`` stays as written."""
    early: list[Issue] = []
    try:
        raw = migrate(raw, file=file)
    except HCPError as exc:
        if not isinstance(raw, dict) or _version_readable(raw.get("schema_version")):
            raise
        # No usable schema_version: check the rest as the current schema anyway, so a
        # misspelt key (``schema_versoin``) is reported in the same run, with its hint.
        early, raw = exc.issues, {**raw, "schema_version": SCHEMA_VERSION}
    lines = key_lines(source) if source else {}
    problems: list[tuple] = []  # (loc, message[, hint]), located and rendered together below
    doc: HCP | None = None
    skills = bundled = None
    try:
        doc = HCP.model_validate(raw)
    except ValidationError as exc:
        problems += [_pydantic_problem(error) for error in exc.errors()]
    except (TypeError, ValueError) as exc:  # a value pydantic cannot even inspect
        problems.append(((), f"invalid document: {exc}"))
    if doc is not None:
        problems += _cross_references(doc)
        doc, skills, bundled = _with_bundles(doc, base_dir, problems)
    found = hcp_files.collect(raw, base_dir)
    problems += found.problems
    issues = early + [Issue(message, file=file, line=line_of(lines, loc),
                            path=format_path(loc), hint=hint[0] if hint else None)
                      for loc, message, *hint in problems]
    if issues or doc is None or skills is None or bundled is None:
        raise HCPError(sorted(issues, key=lambda i: (i.line is None, i.line or 0)))
    bundles, commands, warnings = bundled
    warnings += [w for skill in skills.skills.values() for w in skill.warnings]
    digest = digest_value(_digest_form(doc, found.digests, skills.digests, bundles))
    return Artifact(doc=doc, raw=raw, base_dir=base_dir, path=path, files=found.digests,
                    texts=found.texts, skills=skills.skills,
                    skill_digests=dict(skills.digests), bundles=bundles, commands=commands,
                    warnings=tuple(warnings), digest=digest)


def _with_bundles(doc: HCP, base_dir: Path, problems: list[tuple]) -> tuple[HCP, Any, tuple]:
    """The document with its bundles merged in, its skills, and ``(bundles, commands,
    warnings)``; problems are appended to ``problems``."""
    from mol.hcp import expand
    from mol.skills.catalog import for_artifact  # parses YAML: only when loading

    bundles, found = expand.load_bundles(doc, base_dir)
    doc, merged = expand.expand(doc, bundles)
    skills = for_artifact(doc, base_dir, expand.skill_sources(doc, bundles))
    commands, warnings = expand.commands(doc, bundles)
    problems += found + merged + skills.problems
    warnings = [note for b in bundles.values() for note in b.notes] + warnings
    return doc, skills, (bundles, commands, warnings)


def _version_readable(version: object) -> bool:
    """Whether ``schema_version`` holds an integer (possibly one this mol cannot read)."""
    return isinstance(version, int) and not isinstance(version, bool)


def _digest_form(doc: HCP, digests: dict[str, str], skills: dict[str, str] | None = None,
                 bundles: dict[str, Any] | None = None) -> dict:
    """The canonical document: defaults omitted, each file replaced by its digest.

    ``skills`` (name -> folder digest of each skill an adapter uses, built-in
    or not) enters as ``$skills``, a key no document can hold: editing a file
    of a used skill changes the digest of exactly the artifacts that use it.
    What each bundle contributes (skills, MCP servers, commands, hooks) enters
    as ``$bundles``, besides the bundle folder's own digest.
    """
    dumped = doc.model_dump(mode="json", exclude_defaults=True)
    form = hcp_files.substitute(dumped, digests)
    if skills:
        form["$skills"] = dict(skills)
    if bundles:
        form["$bundles"] = {name: bundle.summary() for name, bundle in sorted(bundles.items())}
    return form


def _cross_references(doc: HCP) -> list[tuple]:
    problems: list[tuple] = []
    if doc.router.fallback not in doc.router.labels:
        problems.append((("router", "fallback"), f"{doc.router.fallback!r} is not one of "
                         f"router.labels {doc.router.labels}"))
    for name in ADAPTERS:
        for index, server in enumerate(doc.adapter(name).mcp_servers):
            if server not in doc.mcp_servers:
                problems.append((
                    ("adapters", name, "mcp_servers", index),
                    f"names MCP server {server!r}, which is not declared under [mcp_servers]",
                    _suggest(server, list(doc.mcp_servers))))
    return problems


def _clean_loc(loc: tuple) -> tuple:
    """Drop the union tags pydantic inserts after a prompt key (``prompt.file.path``)."""
    out: list[Any] = []
    for part in loc:
        if out and out[-1] == "prompt" and part in ("text", "file"):
            continue
        out.append(part)
    return tuple(out)


def _pydantic_problem(error: dict) -> tuple:
    """``(loc, message, hint)`` for one pydantic error, in words for people."""
    loc = _clean_loc(tuple(error["loc"]))
    kind = error["type"]
    hint = None
    if kind == "extra_forbidden":
        message = "unknown key"
        parent = model_at(HCP, loc[:-1])
        if parent is not None and isinstance(loc[-1], str):
            hint = _suggest(loc[-1], list(parent.model_fields))
    elif kind == "missing":
        message = "required key missing"
    else:
        message = error["msg"]
        if "input" in error and kind not in ("value_error", "assertion_error"):
            shown = repr(error["input"])
            message += f", got {shown[:60] + '...' if len(shown) > 60 else shown}"
        if message.startswith("Value error, "):
            message = message[len("Value error, "):]
    return loc, message, hint


def _suggest(word: str, options: list[str]) -> str | None:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    if options:
        return "valid keys: " + ", ".join(sorted(options))
    return None

