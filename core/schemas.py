"""JSON Schema checks of tool arguments, safe against the schemas a hostile server sends.

A tool's schema (from an MCP server, or a hand-written spec) is compiled once
with ``compile_schema``: the schema is checked against its metaschema, a
``$ref`` can only point inside the schema itself (mol never fetches a URL a
schema names), and ``pattern`` / ``patternProperties`` run on the ``regex``
engine under a time budget, so a pattern such as ``^(a+)+$`` cannot stall the
process (``re`` cannot be interrupted and holds the GIL while it backtracks).
A schema that cannot be compiled raises ``SchemaProblem`` with the reason.

``CompiledSchema.check`` validates arguments: optional properties given as
``null`` are dropped first (models send them so), and every failure, a
recursive ``$ref`` or a regex over budget included, becomes a ``ValueError``
whose message speaks JSON (``null``, ``true``), never Python. ``with_defaults`` fills an
object's missing properties from the schema's ``default`` values (an MCP elicitation's
answer, SEP-1034).
"""

from __future__ import annotations

import contextvars
import json
import time
from dataclasses import dataclass, field
from typing import Any

PATTERN_BUDGET_SEC = 0.05
"""Longest one ``pattern`` match may take; past it the argument is refused."""
CHECK_BUDGET_SEC = 0.5
"""Longest one whole validation may take (every pattern of it together)."""
MAX_ERRORS = 5
"""Validation errors named in one message."""


class SchemaProblem(ValueError):
    """A tool schema mol refuses to use (the message says why)."""


@dataclass
class _Budget:
    deadline: float = field(default_factory=lambda: time.monotonic() + CHECK_BUDGET_SEC)

    def left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise _OverBudget("the argument check ran out of its time budget")
        return min(left, PATTERN_BUDGET_SEC)


class _OverBudget(Exception):
    pass


_budget: contextvars.ContextVar[_Budget] = contextvars.ContextVar("mol_schema_budget")


def _no_retrieval(uri: str) -> Any:
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(ref=uri)


def _search(pattern: str, text: str) -> bool:
    import regex

    budget = _budget.get(None) or _Budget()

    try:
        return regex.search(pattern, text, timeout=budget.left(), concurrent=True) is not None
    except TimeoutError:
        raise _OverBudget(f"the pattern {json.dumps(pattern)} took longer than "
                          f"{PATTERN_BUDGET_SEC:g}s") from None


def _validator_class() -> Any:
    """Draft 2020-12 with ``pattern`` and ``patternProperties`` on the budgeted engine."""
    from jsonschema import Draft202012Validator, ValidationError, validators

    def pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Any:
        if validator.is_type(instance, "string") and not _search(patrn, instance):
            yield ValidationError(f"{json.dumps(instance)} does not match {json.dumps(patrn)}")

    def pattern_properties(validator: Any, patterns: dict, instance: Any, schema: Any) -> Any:
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in patterns.items():
            for key, value in instance.items():
                if _search(patrn, key):
                    yield from validator.descend(value, subschema, path=key, schema_path=patrn)

    return validators.extend(Draft202012Validator, {
        "pattern": pattern, "patternProperties": pattern_properties})


_CLASS: Any = None


def _cls() -> Any:
    global _CLASS
    if _CLASS is None:
        _CLASS = _validator_class()
    return _CLASS


class CompiledSchema:
    """A checked tool schema, ready to validate arguments many times."""

    def __init__(self, schema: dict[str, Any]) -> None:
        from referencing import Registry

        self.schema = schema
        self._registry = Registry(retrieve=_no_retrieval)
        self._validator = _cls()(schema, registry=self._registry)
        self.optional = _optional_properties(schema)
        self._heavy = any(key in node for node in _walk(schema)
                          for key in ("pattern", "patternProperties", "$ref", "$dynamicRef"))

    def check(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``arguments`` without null optionals, or ``ValueError`` naming what is wrong."""
        arguments = {k: v for k, v in arguments.items()
                     if not (v is None and k in self.optional and not self._accepts_null(k))}
        token = _budget.set(_Budget())
        try:
            errors = sorted(self._validator.iter_errors(arguments),
                            key=lambda e: [str(p) for p in e.absolute_path])
        except _OverBudget as exc:
            raise ValueError(f"invalid arguments: {exc}") from None
        except RecursionError:
            raise ValueError("invalid arguments: the tool's schema recurses without end") from None
        except Exception as exc:  # an unresolvable $ref, a pattern regex cannot compile, ...
            raise ValueError(f"invalid arguments: the tool's schema cannot be applied: "
                             f"{_reason(exc)}") from None
        finally:
            _budget.reset(token)
        if errors:
            parts = [f"{_where(e)}: {json_message(e)}" for e in errors[:MAX_ERRORS]]
            more = len(errors) - MAX_ERRORS
            raise ValueError("invalid arguments: " + "; ".join(parts)
                             + (f"; and {more} more" if more > 0 else ""))
        return arguments

    @property
    def heavy(self) -> bool:
        """Whether checks may take long enough to belong in a worker thread."""
        return self._heavy

    async def check_async(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``check``, in a worker thread when the schema has patterns or references."""
        if not self._heavy:
            return self.check(arguments)
        import anyio

        return await anyio.to_thread.run_sync(self.check, arguments)

    def _accepts_null(self, name: str) -> bool:
        sub = self.schema.get("properties", {}).get(name)
        if not isinstance(sub, dict):
            return True
        try:
            return self._validator.evolve(schema=sub).is_valid(None)
        except Exception:  # a $ref the property cannot resolve alone: keep the null
            return True


def with_defaults(schema: Any, content: dict[str, Any]) -> dict[str, Any]:
    """``content`` with the schema's ``default`` for every top-level property left out
    (SEP-1034: an elicitation's form, whoever answered it, carries the defaults of what the
    person did not fill in)."""
    filled = dict(content)
    properties = schema.get("properties") if isinstance(schema, dict) else None
    for name, prop in (properties if isinstance(properties, dict) else {}).items():
        if name not in filled and isinstance(prop, dict) and "default" in prop:
            filled[name] = prop["default"]
    return filled


def compile_schema(schema: Any) -> CompiledSchema:
    """Check ``schema`` once; ``SchemaProblem`` says why it cannot be used."""
    from jsonschema.exceptions import SchemaError

    if not isinstance(schema, dict):
        raise SchemaProblem(f"the input schema is a JSON {_json_type(schema)}, not an object")
    try:
        _cls().check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the root"
        raise SchemaProblem(f"the input schema is invalid at {where}: {exc.message}") from None
    except RecursionError:
        raise SchemaProblem("the input schema nests too deeply") from None
    _check_refs(schema)
    _check_ref_cycles(schema)
    _check_patterns(schema)
    compiled = CompiledSchema(schema)
    try:  # a self-referencing root ("$ref": "#") recurses on every input
        compiled.check({})
    except ValueError as exc:
        if "recurses without end" in str(exc) or "cannot be applied" in str(exc):
            raise SchemaProblem(str(exc).removeprefix("invalid arguments: ")) from None
    return compiled


def _walk(node: Any, depth: int = 0) -> Any:
    if depth > 200:
        raise SchemaProblem("the input schema nests more than 200 levels deep")
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value, depth + 1)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value, depth + 1)


def _check_refs(schema: dict[str, Any]) -> None:
    for node in _walk(schema):
        for key in ("$ref", "$dynamicRef"):
            ref = node.get(key)
            if isinstance(ref, str) and not _local_ref(ref, schema):
                raise SchemaProblem(f"the input schema refers to {json.dumps(ref)} outside itself "
                                    "(mol does not fetch schemas)")


def _check_ref_cycles(schema: dict[str, Any]) -> None:
    """Refuse ``$ref`` chains that lead back to themselves before checking anything
    (``a -> b -> a``): every validation would recurse through them without end."""
    for node in _walk(schema):
        seen: list[str] = []
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if not ref.startswith("#"):
                break
            if ref in seen:
                raise SchemaProblem(f"the input schema's $ref {json.dumps(ref)} refers to itself "
                                    "(it recurses without end)")
            seen.append(ref)
            node = _pointer(schema, ref[1:])


def _pointer(schema: Any, pointer: str) -> Any:
    node = schema
    for part in [p for p in pointer.split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _local_ref(ref: str, schema: dict[str, Any]) -> bool:
    """A fragment, a metaschema (bundled with jsonschema) or an ``$id`` of the schema itself."""
    base = ref.split("#", 1)[0]
    if not base or base.startswith("https://json-schema.org/"):
        return True
    ids = {node["$id"].split("#", 1)[0] for node in _walk(schema) if isinstance(node.get("$id"), str)}
    return base in ids


def _check_patterns(schema: dict[str, Any]) -> None:
    import regex

    for node in _walk(schema):
        patterns = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
        if isinstance(node.get("patternProperties"), dict):
            patterns += list(node["patternProperties"])
        for patrn in patterns:
            try:
                regex.compile(patrn)
            except regex.error as exc:
                raise SchemaProblem(f"the pattern {json.dumps(patrn)} is not a valid regular "
                                    f"expression: {exc}") from None


def _optional_properties(schema: dict[str, Any]) -> set[str]:
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return set()
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    return set(properties) - set(required)


def _where(error: Any) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "arguments"


def _json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _json_type(value: Any) -> str:
    for kind, types in (("null", type(None)), ("boolean", bool), ("number", int | float),
                        ("string", str), ("array", list)):
        if isinstance(value, types):
            return kind
    return "object"


def json_message(error: Any) -> str:
    """A jsonschema error in JSON terms (``null is not of type "boolean"``)."""
    kind, value, instance = error.validator, error.validator_value, error.instance
    if kind == "type":
        expected = " or ".join(json.dumps(t) for t in (value if isinstance(value, list) else [value]))
        return f"{_json(instance)} is not of type {expected}"
    if kind == "required":
        missing = [name for name in value if isinstance(instance, dict) and name not in instance]
        return "missing required " + ", ".join(json.dumps(n) for n in missing)
    if kind == "enum":
        return f"{_json(instance)} is not one of {_json(value)}"
    if kind == "const":
        return f"{_json(instance)} is not {_json(value)}"
    if kind == "additionalProperties" and isinstance(instance, dict):
        known = set(error.schema.get("properties", {}))
        extra = [k for k in instance if k not in known]
        return "unknown " + ", ".join(json.dumps(k) for k in extra)
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
                "maxLength", "minItems", "maxItems", "multipleOf"):
        return f"{_json(instance)} breaks {kind} {_json(value)}"
    if kind == "pattern":
        return error.message
    return error.message.replace(repr(instance), _json(instance), 1)


def _reason(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
