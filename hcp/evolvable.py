"""What ``mol evolve`` may change in an artifact: the ``[evolve]`` section and JSON Pointers.

Paths are JSON Pointers (RFC 6901) into the *evolve document* of an artifact
(``mol.eval.evolve.document``): the document with its defaults, prompt files inline as text
and, under ``/$skills/NAME``, the text files of the skills its ``skills.paths`` provide. A
path names a prefix: ``/adapters/*/prompt`` (``*`` is one segment, any key) covers every
adapter's prompt; ``/hooks`` covers every hook. Some paths are never evolvable, whatever
``[evolve] paths`` says: the engine, the sandbox, sessions and serving, the lineage, the
gate itself, the engine's names of the LoRAs, and every MCP server setting that starts a
process, names a secret or reaches the network.

``$keys`` as the last segment stands for the set of keys of an object: adding or removing
an adapter touches ``/adapters/$keys`` (a key no document can hold: adapter names start
with a letter).
"""

from __future__ import annotations

from pydantic import Field, field_validator

from mol.hcp.base import Model

KEYS = "$keys"
"""The segment standing for an object's set of keys."""

DEFAULT_PATHS = ("/adapters/*/prompt", "/router/prompt", "/summary/prompt",
                 "/adapters/*/skills", "/$skills", "/adapters/*/tools", "/hooks")
"""Evolvable by default: prompts, skill lists and skill files, tool policies, hooks."""

NEVER = ("/engine", "/sandbox", "/session", "/server", "/evolve", "/telemetry", "/parent",
         "/schema_version", "/adapters/*/engine_name",
         *(f"/mcp_servers/*/{key}" for key in (
             "command", "args", "env", "env_vars", "env_from", "cwd", "url",
             "bearer_token_env_var", "http_headers", "env_http_headers", "oauth")))
"""Never evolvable: the engine, sandbox limits, deployment (telemetry too), lineage, the gate,
secrets."""


def escape(segment: str) -> str:
    """One JSON Pointer segment: ``~`` as ``~0``, ``/`` as ``~1``."""
    return segment.replace("~", "~0").replace("/", "~1")


def unescape(segment: str) -> str:
    """The key a JSON Pointer segment names."""
    return segment.replace("~1", "/").replace("~0", "~")


def pointer(*segments: object) -> str:
    """The JSON Pointer of a key path: ``pointer("adapters", "L1")`` is ``/adapters/L1``."""
    return "".join("/" + escape(str(segment)) for segment in segments)


def segments(path: str) -> list[str]:
    """The (unescaped) segments of a JSON Pointer; ``""`` (the whole document) has none."""
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"{path!r} is not a JSON Pointer (it must start with '/')")
    return [unescape(part) for part in path[1:].split("/")]


def is_prefix(prefix: str, path: str) -> bool:
    """Whether the pointer ``prefix`` is ``path`` or one of its ancestors."""
    a, b = segments(prefix), segments(path)
    return len(a) <= len(b) and b[:len(a)] == a


def related(a: str, b: str) -> bool:
    """Whether one pointer is a prefix of the other: an edit at one may change what the other
    names."""
    return is_prefix(a, b) or is_prefix(b, a)


def within(pattern: str, path: str) -> bool:
    """Whether ``path`` lies at or under ``pattern`` (``*`` matches any one segment)."""
    want, have = segments(pattern), segments(path)
    return len(want) <= len(have) and all(w in ("*", h) for w, h in zip(want, have,
                                                                         strict=False))


def evolvable(path: str, patterns: list[str] | tuple[str, ...]) -> str | None:
    """Why an edit at ``path`` is refused, or None when ``patterns`` allow it."""
    never = next((p for p in NEVER if within(p, path) or _covers(path, p)), None)
    if never is not None:
        return f"{path} is never evolvable ({never})"
    if not any(within(pattern, path) for pattern in patterns):
        return f"{path} is not under [evolve] paths ({', '.join(patterns)})"
    return None


def _covers(path: str, never: str) -> bool:
    """Whether an edit replacing all of ``path`` replaces something under ``never`` (the
    set of an object's keys, ``$keys``, holds none of their values)."""
    have, want = segments(path), segments(never)
    return have[-1:] != [KEYS] and len(have) < len(want) and all(w in ("*", h) for w, h in zip(want, have,
                                                                       strict=False))


class MinEffect(Model):
    """The smallest improvement a promotion needs, besides its significance."""

    tasks: int = Field(default=1, ge=0)
    """With fewer than 30 affected tasks: wins minus losses, in tasks."""
    points: float = Field(default=2.0, ge=0)
    """From 30 affected tasks up: the gain of the suite's pass rate, in percentage points."""


class EvolveConfig(Model):
    """What ``mol evolve`` may change and how its gate decides (see docs/evolve.md)."""

    paths: list[str] = Field(default_factory=lambda: list(DEFAULT_PATHS))
    """JSON Pointer prefixes of the evolve document a proposal may touch (``*`` matches one
    segment). The engine, sandbox, session, server, telemetry, lineage, ``[evolve]``, engine
    names and MCP server commands and secrets are never evolvable."""
    min_effect: MinEffect = Field(default_factory=MinEffect)
    """The minimum effect a promotion needs (1 task, or 2 points from 30 tasks up)."""
    max_cost_increase: float = Field(default=0.10, ge=0)
    """How much worse tokens and wall time per episode may get (0.10: 10%)."""

    @field_validator("paths")
    @classmethod
    def _pointers(cls, paths: list[str]) -> list[str]:
        for path in paths:
            try:
                segments(path)
            except ValueError as exc:
                raise ValueError(str(exc)) from None
            never = next((p for p in NEVER if within(p, path) or _covers(path, p)), None)
            if never is not None:
                raise ValueError(f"{path!r} covers {never}, which is never evolvable")
        return paths
