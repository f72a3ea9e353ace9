"""Load an HCP artifact: TOML -> ``schema_version`` migrations -> validation -> files -> digest.

Every problem is collected and raised together as one ``HCPError``; each
names the file, the line when known, the key path and, for a typo, the
closest valid key.
"""

from __future__ import annotations

import copy
import difflib
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mol.core.errors import HCPError
from mol.hcp import files as hcp_files
from mol.hcp import loras
from mol.hcp.digest import digest_value
from mol.hcp.issues import Issue, format_path
from mol.hcp.locate import key_lines, line_of
from mol.hcp.migrations import OLDEST_VERSION, migrate
from mol.hcp.prompts import render_prompts
from mol.hcp.schema import ADAPTER_NAME, ANSWERING, HCP, SCHEMA_VERSION, FileRef
from mol.hcp.types import model_at


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
    prompts: dict[str, str] = field(default_factory=dict)
    """Prompt key path (``router.prompt``, ``adapters.L2.prompt``, ``summary.prompt``,
    ``model.identity``) -> its text with the placeholders rendered, once at load time."""
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
    that mol does not run, tool-name patterns that select no tool (``mol.hcp.patterns``)."""
    digest: str = ""
    """``sha256:<hex>`` over the canonical document with files replaced by their digests."""
    behaviour_digest: str = ""
    """``sha256:<hex>`` over what shapes the artifact's episodes: the canonical document
    without its deployment fields (``BEHAVIOUR_EXCLUDED``), prompt files as their text. Eval
    results are keyed by it, so moving the engine does not invalidate them."""

    @property
    def name(self) -> str:
        """The artifact's ``name``."""
        return self.doc.name

    def resolve(self, relative: str) -> Path:
        """Absolute path of a file reference."""
        return hcp_files.resolve(self.base_dir, relative)

    def prompt_text(self, prompt: str | FileRef | None) -> str:
        """The raw text of a prompt: inline text, or the file's text as it was at load time
        (placeholders not rendered; requests use ``prompt``)."""
        if prompt is None:
            return ""
        if isinstance(prompt, FileRef):
            return self.texts[prompt.path]
        return prompt

    def prompt(self, key: str) -> str:
        """The rendered prompt at key path ``key`` (e.g. ``adapters.L2.prompt``); ``""`` when
        the artifact sets none there."""
        return self.prompts.get(key, "")


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
    lines = key_lines(source) if source else {}
    raw, early = _migrated(raw, file, lines)
    problems: list[tuple] = []  # (loc, message[, hint]), located and rendered together below
    doc: HCP | None = None
    skills = bundled = None
    prompts: dict[str, str] = {}
    try:
        doc = HCP.model_validate(raw)
    except ValidationError as exc:
        problems += [_pydantic_problem(error) for error in exc.errors()]
    except (TypeError, ValueError) as exc:  # a value pydantic cannot even inspect
        problems.append(((), f"invalid document: {exc}"))
    if doc is not None:
        problems += _cross_references(doc)
        doc, skills, bundled = _with_bundles(doc, base_dir, problems)
    problems += _adapter_references(raw)
    found = hcp_files.collect(raw, base_dir)
    problems += found.problems
    lora_hashes = loras.check(raw, base_dir, problems)
    issues = early + [Issue(message, file=file, line=line_of(lines, loc),
                            path=format_path(loc), hint=hint[0] if hint else None)
                      for loc, message, *hint in problems]
    if doc is not None:
        prompts, rendering = render_prompts(doc, found.texts, base_dir, file,
                                            lambda loc: line_of(lines, loc))
        issues += rendering
    if issues or doc is None or skills is None or bundled is None:
        raise HCPError(sorted(issues, key=lambda i: (i.line is None, i.line or 0)))
    bundles, commands, warnings = bundled
    loras.fill(doc, lora_hashes)
    warnings += [w for skill in skills.skills.values() for w in skill.warnings]
    form = _digest_form(doc, found.digests, skills.digests, bundles)
    return Artifact(doc=doc, raw=raw, base_dir=base_dir, path=path, files=found.digests,
                    texts=found.texts, prompts=prompts, skills=skills.skills,
                    skill_digests=dict(skills.digests), bundles=bundles, commands=commands,
                    warnings=tuple(warnings), digest=digest_value(form),
                    behaviour_digest=digest_value(behaviour_form(form, doc, found.texts)))


def _migrated(raw: Any, file: str | None, lines: dict) -> tuple[Any, list[Issue]]:
    """The document migrated to the newest schema, and the issues found on the way when it
    has no usable ``schema_version`` (then the rest is checked anyway)."""
    try:
        return migrate(raw, file=file), []
    except HCPError as exc:
        if not isinstance(raw, dict) or _version_readable(raw.get("schema_version")):
            raise HCPError([replace(i, line=line_of(lines, tuple(i.path.split(".")))) if (
                i.line is None and i.path) else i for i in exc.issues]) from None
        # A misspelt key (``schema_versoin``) is reported in the same run, with its hint:
        # as the oldest version when that reads it (a document without [adapters]), else
        # as the newest.
        try:
            return migrate({**raw, "schema_version": OLDEST_VERSION}, file=file), exc.issues
        except HCPError:
            return {**raw, "schema_version": SCHEMA_VERSION}, exc.issues


def _with_bundles(doc: HCP, base_dir: Path, problems: list[tuple]) -> tuple[HCP, Any, tuple]:
    """The document with its bundles merged in, its skills, and ``(bundles, commands,
    warnings)``; problems are appended to ``problems``."""
    from mol.hcp import expand, patterns
    from mol.hcp.skills import for_artifact  # parses YAML: only when loading

    bundles, found = expand.load_bundles(doc, base_dir)
    doc, merged = expand.expand(doc, bundles)
    skills = for_artifact(doc, base_dir, expand.skill_sources(doc, bundles))
    commands, warnings = expand.commands(doc, bundles)
    problems += found + merged + skills.problems
    warnings = [note for b in bundles.values() for note in b.notes] + warnings
    warnings += patterns.warnings(doc, bundles, commands)
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


BEHAVIOUR_EXCLUDED = (("engine", "api_base"), ("engine", "api_key_env"), ("session", "store"),
                      ("server",), ("evolve",), ("telemetry",), ("parent",), ("name",),
                      ("description",))
"""What the behaviour digest leaves out: where the engine is and its key, where sessions are
kept, what ``mol serve`` exposes, the lineage, the evolve gate, where traces go and the
names for people."""


def behaviour_form(form: dict, doc: HCP, texts: dict[str, str]) -> dict:
    """The digest form without ``BEHAVIOUR_EXCLUDED`` (emptied tables dropped) and with each
    prompt file replaced by its text: a prompt moved between a file and inline text keeps
    the behaviour digest."""
    form = copy.deepcopy(form)
    for loc in hcp_files.prompt_locations({"adapters": dict(doc.adapters)}):
        prompt: Any = doc
        for part in loc:
            prompt = prompt.get(part) if isinstance(prompt, dict) else getattr(prompt, part, None)
        holder = form
        for part in loc[:-1]:
            holder = holder.get(part) if isinstance(holder, dict) else None
        if isinstance(prompt, FileRef) and isinstance(holder, dict) and loc[-1] in holder:
            holder[loc[-1]] = texts.get(prompt.path, holder[loc[-1]])
    for loc in BEHAVIOUR_EXCLUDED:
        _drop(form, loc)
    return form


def _drop(table: dict, loc: tuple) -> None:
    """Remove the key at ``loc``, and the tables that leaves empty."""
    head, *rest = loc
    if not rest:
        table.pop(head, None)
    elif isinstance(table.get(head), dict):
        _drop(table[head], tuple(rest))
        if not table[head]:
            del table[head]


def _adapter_references(raw: dict) -> list[tuple]:
    """Every adapter another section names must be declared, and the fallback must be a
    label. Read from the document as written, so these are reported together with any
    schema error elsewhere."""

    def get(*keys: str) -> Any:
        value: Any = raw
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        return value

    adapters = get("adapters")
    declared = sorted(k for k in adapters if isinstance(k, str)) if isinstance(
        adapters, dict) else []
    labels = get("router", "labels")
    labels = labels if isinstance(labels, list) else None
    named: list[tuple[tuple, Any]] = [(("router", "labels", i), label)
                                      for i, label in enumerate(labels or [])]
    named += [((*keys,), get(*keys)) for keys in (
        ("router", "adapter"), ("router", "fallback"), ("router", "unavailable_fallback"),
        ("summary", "adapter"))]
    skip = get("summary", "skip")
    named += [(("summary", "skip", i), n) for i, n in enumerate(skip)] if isinstance(
        skip, list) else []
    loras = get("engine", "local_loras")
    named += [(("engine", "local_loras", n), n) for n in loras] if isinstance(
        loras, dict) else []

    def undeclared(loc: tuple, value: Any) -> bool:
        # A malformed name is the schema's to report; "answering" is no adapter's name.
        if not isinstance(value, str) or value in declared or not re.match(ADAPTER_NAME, value):
            return False
        return not (loc == ("summary", "adapter") and value == ANSWERING)

    problems: list[tuple] = [
        (loc, f"names adapter {value!r}, which is not declared under [adapters]",
         _suggest(value, declared, "declared adapters"))
        for loc, value in named if undeclared(loc, value)]
    fallback = get("router", "fallback")
    if labels is not None and isinstance(fallback, str) and fallback in declared and (
            fallback not in labels):
        problems.append((("router", "fallback"), f"{fallback!r} is not one of router.labels "
                         f"{labels}"))
    return problems


def _cross_references(doc: HCP) -> list[tuple]:
    """Named MCP servers must be declared (adapter names are checked on the raw document)."""
    problems: list[tuple] = []
    for name in doc.adapter_names:
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


def _suggest(word: str, options: list[str], kind: str = "valid keys") -> str | None:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    if options:
        return f"{kind}: " + ", ".join(sorted(options))
    return None

