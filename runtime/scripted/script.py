"""The scripted engine's script: rules per adapter, validated on load, matched per request.

A script maps each adapter name to an ordered list of rules. A request is
answered by the first rule of its adapter that still has uses left and whose
``when`` / ``constrained`` conditions hold; using a rule counts against its
``times``. See docs/scripted-engine.md for the format.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mol.core.errors import UsageError

RULE_FIELDS = ("when", "when_system", "p", "constrained", "times", "reply", "tool_calls", "error",
               "delay", "usage", "reasoning")
ANSWER_FIELDS = ("reply", "tool_calls", "error")
TOOL_CALL_FIELDS = ("name", "arguments")
ERROR_FIELDS = ("status", "message", "type", "kind", "limit")
ERROR_KINDS = ("adapter_not_loaded", "context_length")
"""Errors a real engine gives in its own words: vLLM's 404 for a model (LoRA) it does not
serve, and its 400 for a prompt longer than the context window (``limit`` tokens)."""
USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens")


@dataclass(frozen=True)
class ScriptedToolCall:
    """One tool call a rule makes the model emit."""

    name: str
    arguments: str
    """The arguments as the JSON text sent over the wire (kept verbatim when scripted as a string)."""


@dataclass(frozen=True)
class ScriptedError:
    """An HTTP error a rule answers with instead of a completion."""

    status: int
    message: str
    type: str | None = None
    kind: str | None = None
    """``adapter_not_loaded`` or ``context_length``: the engine's own error, worded per request."""
    limit: int = 4096
    """The context window a ``context_length`` error names, in tokens."""


@dataclass(eq=False)
class Rule:
    """One scripted answer of one adapter, with its matching conditions and use count."""

    adapter: str
    index: int
    reply: str | None = None
    tool_calls: tuple[ScriptedToolCall, ...] | None = None
    error: ScriptedError | None = None
    when: re.Pattern[str] | None = None
    when_system: re.Pattern[str] | None = None
    """Searched in the request's system prompt (its system and developer messages)."""
    p: float | None = None
    """The chance that the rule answers a request it matches (a seeded draw); None: always."""
    constrained: bool | None = None
    times: int = 1
    """How often the rule may be used; ``-1``: without limit."""
    delay: float = 0.0
    usage: Mapping[str, int] | None = None
    reasoning: str | None = None
    """The model's thinking, sent as ``reasoning_content`` unless the request turns it off."""
    used: int = 0

    @property
    def where(self) -> str:
        """The rule's address in the script, e.g. ``L2[1]`` (0-based)."""
        return f"{shown(self.adapter)}[{self.index}]"

    @property
    def exhausted(self) -> bool:
        """Whether every use the rule allows has been taken."""
        return self.times != -1 and self.used >= self.times

    def refusal(self, text: str, constrained: bool, system: str = "",
                draw: float | None = None) -> str | None:
        """Why this rule does not match a request, or None when it does; ``draw`` (in [0, 1))
        decides a stochastic rule (``p``)."""
        if self.exhausted:
            return f"used {self.used} of {self.times} times"
        if self.constrained is True and not constrained:
            return "needs a constrained request"
        if self.constrained is False and constrained:
            return "needs an unconstrained request"
        if self.when is not None and not self.when.search(text):
            return f"when {self.when.pattern!r} not found"
        if self.when_system is not None and not self.when_system.search(system):
            return f"when_system {self.when_system.pattern!r} not found in the system prompt"
        if self.p is not None and draw is not None and draw >= self.p:
            return f"p = {self.p:g}: drew {draw:.3f}"
        return None

    def __repr__(self) -> str:
        kind = next(name for name in ANSWER_FIELDS if getattr(self, name) is not None)
        limit = "unlimited" if self.times == -1 else str(self.times)
        return f"<Rule {self.where} {kind}, used {self.used} of {limit}>"


class Script:
    """The rules of every adapter; ``match`` takes one use of the first matching rule.

    Stochastic rules (``p``) draw from a hash of the seed, the rule, the request and how many
    identical requests came before it: the same requests in the same order get the same
    answers, whatever else the engine serves in between."""

    def __init__(self, rules: Mapping[str, list[Rule]], *, seed: int = 0,
                 source: Any = None) -> None:
        self.rules = dict(rules)
        self.seed = seed
        self.source = source
        """The parsed script (the fingerprint is its digest)."""
        self._seen: dict[str, int] = {}
        self._drawn: tuple[str, str, dict[int, float]] = ("", "", {})
        """The draws of the last request matched (its refusals name them)."""

    def fingerprint(self) -> str:
        """``sha256:`` over the script and the seed: what ``/v1/models`` reports as ``root``."""
        data = json.dumps({"script": self.source, "seed": self.seed}, sort_keys=True,
                          default=str).encode()
        return "sha256:" + hashlib.sha256(data).hexdigest()

    @property
    def adapters(self) -> list[str]:
        """The adapter names the script serves, in script order."""
        return list(self.rules)

    def match(self, adapter: str, text: str, constrained: bool, system: str = "",
              request: str = "") -> Rule | None:
        """The first rule of ``adapter`` matching the request, its use counted; None if none.
        ``request`` identifies the request (a digest of its body) for stochastic rules."""
        draws = self._draws(adapter, request)
        for rule in self.rules.get(adapter, []):
            if rule.refusal(text, constrained, system, draws.get(rule.index)) is None:
                rule.used += 1
                return rule
        return None

    def refusals(self, adapter: str, text: str, constrained: bool, system: str = "",
                 request: str = "") -> list[str]:
        """Why each rule of ``adapter`` does not match (for the unmatched-request error)."""
        last_adapter, last_request, drawn = self._drawn
        draws = drawn if (last_adapter, last_request) == (adapter, request) else {}
        return [f"{rule.where} {rule.refusal(text, constrained, system, draws.get(rule.index))}"
                for rule in self.rules.get(adapter, [])]

    def _draws(self, adapter: str, request: str) -> dict[int, float]:
        """A draw in [0, 1) per stochastic rule of ``adapter`` for this request."""
        stochastic = [rule for rule in self.rules.get(adapter, []) if rule.p is not None]
        if not stochastic:
            return {}
        seen = self._seen[request] = self._seen.get(request, 0) + 1
        draws = {}
        for rule in stochastic:
            key = f"{self.seed}|{rule.where}|{request}|{seen}".encode()
            draws[rule.index] = int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2**64
        self._drawn = (adapter, request, draws)
        return draws

    def unused(self) -> list[Rule]:
        """Rules with uses left: finite ones not used up, unlimited ones never used."""
        return [
            rule
            for rules in self.rules.values()
            for rule in rules
            if not rule.exhausted and (rule.times != -1 or rule.used == 0)
        ]


def load_script(source: str | Mapping[str, Any] | Path | Script, seed: int = 0) -> Script:
    """Parse and validate a script given as TOML text, a mapping, a TOML file or a ``Script``
    (``seed`` drives its stochastic rules).

    Raises ``UsageError`` listing every problem, each naming the adapter, the
    rule index and the field (``L2[1]: unknown field 'repy'``).
    """
    if isinstance(source, Script):
        return source
    origin = "script"
    if isinstance(source, Path):
        origin = str(source)
        try:
            source = source.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{origin}: cannot read the script: {exc.strerror}") from exc
    if isinstance(source, str):
        try:
            source = tomllib.loads(source)
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"{origin}: invalid TOML: {exc}") from exc
    checker = _Checker()
    rules = checker.script(source)
    if checker.issues:
        lines = [f"{origin}: {issue}" for issue in checker.issues]
        if len(lines) > 1:
            lines.insert(0, f"{origin}: {len(lines)} problems in the script:")
        raise UsageError("\n".join(lines))
    return Script(rules, seed=seed, source=source)


def shown(adapter: str) -> str:
    """An adapter's name as problems start with it: quoted when it is empty or holds a
    space, a colon or a bracket (else ``script: : ...`` would name nothing)."""
    plain = isinstance(adapter, str) and re.fullmatch(r"[^\s:\[\]]+", adapter)
    return adapter if plain else repr(adapter)


def _kind(value: Any) -> str:
    """A value's type in TOML words, for error messages."""
    names = {bool: "a boolean", str: "a string", int: "an integer", float: "a float",
             list: "an array", dict: "a table"}
    return names.get(type(value), f"a {type(value).__name__}")


class _Checker:
    """Validates a parsed script, collecting every problem instead of stopping at the first."""

    def __init__(self) -> None:
        self.issues: list[str] = []

    def script(self, raw: Any) -> dict[str, list[Rule]]:
        if not isinstance(raw, Mapping):
            self.issues.append(f"expected a table of adapters, got {_kind(raw)}")
            return {}
        if not raw:
            self.issues.append("the script names no adapters (expected [[L0]]-style rule arrays)")
        rules: dict[str, list[Rule]] = {}
        for adapter, entries in raw.items():
            if not isinstance(entries, list):
                self.issues.append(f"{shown(adapter)}: expected an array of rules "
                                   f"([[{adapter}]]), got {_kind(entries)}")
                continue
            rules[adapter] = [self.rule(adapter, i, entry) for i, entry in enumerate(entries)]
        return rules

    def unknown(self, where: str, raw: Mapping, known: tuple[str, ...]) -> None:
        for key in raw:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(known)})"
                self.issues.append(f"{where}: unknown field {key!r}{hint}")

    def typed(self, where: str, raw: Mapping, key: str, types: type | tuple, what: str) -> Any:
        """``raw[key]`` if present and of ``types`` (booleans are never numbers), else None."""
        if key not in raw:
            return None
        value = raw[key]
        if isinstance(value, types) and not (isinstance(value, bool) and bool not in _tuple(types)):
            return value
        self.issues.append(f"{where}.{key}: expected {what}, got {_kind(value)}")
        return None

    def rule(self, adapter: str, index: int, raw: Any) -> Rule:
        rule = Rule(adapter, index, reply="")
        where = rule.where
        if not isinstance(raw, Mapping):
            self.issues.append(f"{where}: expected a table, got {_kind(raw)}")
            return rule
        self.unknown(where, raw, RULE_FIELDS)
        answers = [key for key in ANSWER_FIELDS if key in raw]
        if len(answers) != 1:
            given = f", got {' and '.join(answers)}" if answers else ""
            self.issues.append(f"{where}: needs exactly one of 'reply', 'tool_calls', 'error'{given}")
        rule.reply = self.typed(where, raw, "reply", str, "a string")
        rule.tool_calls = self.tool_calls(where, raw)
        rule.error = self.error(where, raw)
        if rule.reply is None and rule.tool_calls is None and rule.error is None:
            rule.reply = ""  # keeps the (invalid) rule printable; the issue is recorded
        rule.when = self.pattern(where, raw)
        rule.when_system = self.pattern(where, raw, "when_system")
        rule.p = self.chance(where, raw)
        rule.constrained = self.typed(where, raw, "constrained", bool, "true or false")
        times = self.typed(where, raw, "times", int, "an integer")
        if times is not None and times < 1 and times != -1:
            self.issues.append(f"{where}.times: expected -1 (no limit) or a positive count, got {times}")
        rule.times = times if times is not None else 1
        delay = self.typed(where, raw, "delay", (int, float), "a number of seconds")
        if delay is not None and not 0 <= delay < float("inf"):
            self.issues.append(f"{where}.delay: expected a finite number of seconds >= 0, got {delay}")
        rule.delay = float(delay or 0)
        rule.usage = self.usage(where, raw)
        rule.reasoning = self.typed(where, raw, "reasoning", str, "a string")
        return rule

    def pattern(self, where: str, raw: Mapping, key: str = "when") -> re.Pattern[str] | None:
        text = self.typed(where, raw, key, str, "a regular expression string")
        if text is None:
            return None
        try:
            return re.compile(text)
        except re.error as exc:
            self.issues.append(f"{where}.{key}: invalid regular expression {text!r}: {exc}")
            return None

    def chance(self, where: str, raw: Mapping) -> float | None:
        p = self.typed(where, raw, "p", (int, float), "a probability")
        if p is not None and not (math.isfinite(p) and 0 <= p <= 1):
            self.issues.append(f"{where}.p: expected a probability between 0 and 1, got {p}")
            return None
        return None if p is None else float(p)

    def tool_calls(self, where: str, raw: Mapping) -> tuple[ScriptedToolCall, ...] | None:
        calls = self.typed(where, raw, "tool_calls", list, "an array of { name, arguments } tables")
        if calls is None:
            return None
        if not calls:
            self.issues.append(f"{where}.tool_calls: expected at least one tool call")
        out = []
        for i, call in enumerate(calls):
            at = f"{where}.tool_calls[{i}]"
            if not isinstance(call, Mapping):
                self.issues.append(f"{at}: expected a {{ name, arguments }} table, got {_kind(call)}")
                continue
            self.unknown(at, call, TOOL_CALL_FIELDS)
            name = self.typed(at, call, "name", str, "a string")
            if not name:
                self.issues.append(f"{at}.name: a non-empty tool name is required")
            arguments = self.typed(at, call, "arguments", (dict, str), "a table or a raw string")
            if isinstance(arguments, dict):
                try:
                    arguments = json.dumps(arguments, ensure_ascii=False)
                except (TypeError, ValueError) as exc:
                    self.issues.append(f"{at}.arguments: not representable as JSON: {exc}")
            out.append(ScriptedToolCall(name or "", arguments if isinstance(arguments, str) else "{}"))
        return tuple(out)

    def error(self, where: str, raw: Mapping) -> ScriptedError | None:
        spec = self.typed(where, raw, "error", dict, "a { status, message } table")
        if spec is None:
            return None
        at = f"{where}.error"
        self.unknown(at, spec, ERROR_FIELDS)
        kind = self.typed(at, spec, "kind", str, "a string")
        if kind is not None:
            return self.engine_error(at, spec, kind)
        if "limit" in spec:
            self.issues.append(f"{at}.limit: only a kind = 'context_length' error has a limit")
        status = self.typed(at, spec, "status", int, "an integer")
        if status is None or not 400 <= status <= 599:
            self.issues.append(f"{at}.status: expected an HTTP error status 400..599, got {status!r}")
        message = self.typed(at, spec, "message", str, "a string")
        error_type = self.typed(at, spec, "type", str, "a string")
        return ScriptedError(status or 500, message or f"scripted error {status}", error_type)

    def engine_error(self, at: str, spec: Mapping, kind: str) -> ScriptedError:
        """An error of one of the ``ERROR_KINDS``: its status and wording are the engine's."""
        if kind not in ERROR_KINDS:
            self.issues.append(f"{at}.kind: expected one of {', '.join(ERROR_KINDS)}, got {kind!r}")
        given = [key for key in ("status", "message", "type") if key in spec]
        if given:
            self.issues.append(f"{at}: kind = {kind!r} sets the status and message itself; "
                               f"remove {', '.join(given)}")
        limit = self.typed(at, spec, "limit", int, "an integer")
        if limit is not None and (limit < 1 or kind != "context_length"):
            self.issues.append(f"{at}.limit: expected a positive token count for a "
                               f"context_length error, got {limit}")
        if kind == "adapter_not_loaded":
            return ScriptedError(404, "", "NotFoundError", kind)
        return ScriptedError(400, "", "BadRequestError", kind, limit or 4096)

    def usage(self, where: str, raw: Mapping) -> dict[str, int] | None:
        spec = self.typed(where, raw, "usage", dict, "a table of token counts")
        if spec is None:
            return None
        at = f"{where}.usage"
        self.unknown(at, spec, USAGE_FIELDS)
        counts = {}
        for key in USAGE_FIELDS:
            value = self.typed(at, spec, key, int, "an integer")
            if value is not None and value < 0:
                self.issues.append(f"{at}.{key}: expected a count >= 0, got {value}")
            elif value is not None:
                counts[key] = value
        return counts


def _tuple(types: type | tuple) -> tuple:
    return types if isinstance(types, tuple) else (types,)
