"""Checking an A2UI stream: JSON, the declared version, each message against the official
schema of that version's protocol, then the catalog checks over the surfaces the stream builds.

The versions and message types are the package's (``mol.genui.a2ui.schemas``): a stream
declares one protocol, and each message a version of it the renderer accepts for its type
(``v0.9`` and ``v0.9.1`` are both the v0.9 protocol).

A stream is JSON lines (one message per line), or one JSON list of messages, or a
single message. Every problem names the line (or the position in the list) and
the JSON pointer inside the message, and says what was expected.
"""

from __future__ import annotations

import json
from typing import Any

from mol.genui.a2ui.schemas import Protocol, Schemas
from mol.genui.a2ui.surfaces import Located, Surfaces, pointer
from mol.genui.report import Checked, Problem


def parse(text: str, first_line: int = 1) -> tuple[list[Located], list[Problem]]:
    """The messages of ``text``, each with where it is, and the parse problems."""
    stripped = text.strip()
    if not stripped:
        return [], [Problem(f"line {first_line}", "the A2UI block is empty", "json")]
    lead = first_line + text[: text.index(stripped[0])].count("\n")
    try:
        whole = json.loads(stripped)
    except json.JSONDecodeError as exc:
        if stripped.startswith("["):
            return [], [_json_problem(exc, lead)]
    else:
        if isinstance(whole, list):
            return [Located(f"line {lead} message {i + 1}", m) for i, m in enumerate(whole)], []
        return [Located(f"line {lead}", whole)], []
    found, problems = [], []
    # Lines end at "\n" only: splitlines() would also cut at "\r", U+2028 and others, which
    # may stand raw inside a JSON string, and would count lines unlike the answer does.
    for number, line in enumerate(text.split("\n"), start=first_line):
        if not line.strip():
            continue
        try:
            found.append(Located(f"line {number}", json.loads(line)))
        except json.JSONDecodeError as exc:
            problems.append(_json_problem(exc, number))
    return found, problems


def _json_problem(exc: json.JSONDecodeError, first_line: int) -> Problem:
    return Problem(f"line {first_line + exc.lineno - 1}, column {exc.colno}",
                   f"not valid JSON: {exc.msg}", "json")


def check_a2ui(text: str, schemas: Schemas, *, first_line: int = 1,
               origin: str = "answer") -> Checked:
    """Check one A2UI stream; ``first_line`` is where it starts in the answer."""
    return check_stream([(text, first_line)], schemas, origin=origin)


def check_stream(pieces: list[tuple[str, int]], schemas: Schemas, *,
                 origin: str = "answer") -> Checked:
    """Check the A2UI blocks of one answer as one stream: (text, first line) each, in order."""
    located, problems = [], []
    for text, first_line in pieces:
        found, wrong = parse(text, first_line)
        located += found
        problems += wrong
    source = "\n".join(text.strip("\n") for text, _ in pieces)
    result = Checked("a2ui", source, origin, problems, [m.message for m in located])
    if problems:
        return result
    protocol = _protocol(located, schemas, problems)
    if protocol is None:
        return result
    result.version = located[0].message["version"]
    surfaces = Surfaces(schemas.catalogs[protocol.folder], protocol.folder)
    every = {key for other in schemas.protocols.values() for key in other.messages}
    for item in located:
        key = _message_type(item, protocol, every, problems)
        if key is None:
            continue
        problems += _schema_problems(item, key, protocol, schemas, surfaces)
        problems += surfaces.apply(item, key)
    problems += surfaces.finish()
    return result


def _protocol(located: list[Located], schemas: Schemas,
              problems: list[Problem]) -> Protocol | None:
    """The one protocol the stream's versions declare; problems for messages that declare
    none, or another."""
    known = schemas.versions
    declared: Protocol | None = None
    first = ""
    for item in located:
        if not isinstance(item.message, dict):
            problems.append(Problem(item.where, "an A2UI message is a JSON object, not "
                                    f"{type(item.message).__name__}", "schema"))
            continue
        version = item.message.get("version")
        protocol = known.get(version) if isinstance(version, str) else None
        if protocol is None:
            problems.append(Problem(f"{item.where} /version", f"'version' is {version!r}; "
                                    f"expected one of {', '.join(map(repr, known))}",
                                    "version"))
        elif declared is None:
            declared, first = protocol, version
        elif protocol is not declared:
            same = " or ".join(map(repr, declared.versions))
            problems.append(Problem(f"{item.where} /version", f"the stream declared {first!r} "
                                    f"first; every message must keep its protocol ({same}), "
                                    f"not {version!r}", "version"))
    return declared if not problems else None


def _message_type(item: Located, protocol: Protocol, every: set[str],
                  problems: list[Problem]) -> str | None:
    """The message's type; a problem when it holds none, several, or another protocol's."""
    keys = [k for k in item.message if k in every]
    allowed = list(protocol.messages)
    version = item.message["version"]
    if len(keys) == 1 and keys[0] in allowed:
        return keys[0]
    if not keys:
        what = "no message type"
    elif len(keys) > 1:
        what = f"several message types ({', '.join(keys)})"
    else:
        what = f"{keys[0]!r} is not a message of {version}"
    problems.append(Problem(item.where, f"{what}: a message holds exactly one of "
                            f"{', '.join(allowed)}", "schema"))
    return None


def _schema_problems(item: Located, key: str, protocol: Protocol, schemas: Schemas,
                     surfaces: Surfaces) -> list[Problem]:
    """The message against its schema; components one by one against their catalog's."""
    found = []
    body = item.message[key]
    components = body.get("components") if isinstance(body, dict) else None
    listed = isinstance(components, list) and bool(components)
    # The components are checked one by one against their own type's schema below: the
    # message's oneOf over every type is slow and says only "none matched".
    probe = {**item.message, key: {**body, "components": []}} if listed else item.message
    for error in schemas.message(protocol, key).iter_errors(probe):
        path = list(error.absolute_path)
        if listed and path == [key, "components"] and error.validator == "minItems":
            continue
        found.append(Problem(f"{item.where} {pointer(path)}", describe(error), "schema"))
    if not listed:
        return found
    catalog = surfaces.catalog_of(item.message[key].get("surfaceId"))
    for index, component in enumerate(components):
        at = [key, "components", index]
        kind = component.get("component") if isinstance(component, dict) else None
        if not isinstance(component, dict):
            found.append(Problem(f"{item.where} {pointer(at)}", "a component is a JSON object "
                                 "with 'id' and 'component'", "schema"))
        elif not isinstance(kind, str) or kind not in catalog.components:  # [..] is unhashable
            names = ", ".join(sorted(catalog.components))
            found.append(Problem(f"{item.where} {pointer([*at, 'component'])}",
                                 f"unknown component type {kind!r}; the catalog {catalog.id} "
                                 f"has {names}", "unknown-component"))
        else:
            for error in schemas.component(protocol, catalog, kind).iter_errors(component):
                message = _component_error(error, component, catalog.declared(kind), kind)
                if message:
                    where = pointer([*at, *error.absolute_path])
                    found.append(Problem(f"{item.where} {where}", message, "schema"))
    return found


def _component_error(error: Any, component: dict[str, Any], declared: set[str],
                     kind: str) -> str | None:
    """The error's sentence; an unevaluated-properties error names only the truly unknown
    properties (it also lists the declared ones when another part of the schema failed)."""
    if error.validator != "unevaluatedProperties" or list(error.absolute_path):
        return describe(error)
    extra = sorted(set(component) - declared)
    if not extra:
        return None
    allowed = ", ".join(sorted(declared - {"component"}))
    return f"unexpected properties {', '.join(map(repr, extra))}: a {kind} has {allowed}"


def describe(error: Any) -> str:
    """A schema error as a sentence: the deepest relevant reason for ``oneOf`` failures."""
    from jsonschema.exceptions import best_match

    if error.validator in ("oneOf", "anyOf") and error.context:
        best = best_match(error.context)
        shown = json.dumps(error.instance)[:80]
        return f"{shown} matches none of the allowed forms (closest: {best.message})"
    return error.message
