"""Chat-format training examples for one adapter, deduplicated by prefix, written as JSONL
beside a manifest that says where they came from.

An example is one line: ``{"messages": [...], "tools": [...], "mol": {...}}``: the
messages the engine received (the request's body as litellm sent it) followed by the
assistant message the adapter answered with, the tools it was offered (omitted when none),
and where it came from (``mol``: its kind, ``answer`` or ``route``, the episode or session,
the outcome). With deduplication on, an example whose messages (and tools) are a prefix
of another's, or equal to another's, is left out: a later answer step of the same
adapter in the same episode repeats every earlier one.

The manifest (``FILE`` with ``.manifest.json`` for its suffix) names the source (run
folder or session store, HCP digest), the adapter, the filters, the counts and the JSONL
file's SHA-256, so an adapter trained on the file can be traced back to its data.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mol.core import __version__
from mol.eval.exports.source import out_file, write_text

FORMAT = 1
"""Version of the example lines and the manifest (the manifest's ``format``)."""


@dataclass
class Example:
    """One training example."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    mol: dict[str, Any] = field(default_factory=dict)
    """Where it came from: ``kind`` (``answer``, ``route``) and the episode's facts."""

    def line(self) -> str:
        """The JSONL line (keys as mol and litellm ordered them; UTF-8 as is)."""
        data: dict[str, Any] = {"messages": self.messages}
        if self.tools:
            data["tools"] = self.tools
        data["mol"] = self.mol
        return json.dumps(data, ensure_ascii=False)

    def keys(self) -> list[str]:
        """Each message as canonical JSON, after the tools: the example's prefix keys."""
        head = json.dumps({"tools": self.tools or [], "kind": self.mol.get("kind"),
                           "label": self.mol.get("label"),
                           "led_to_success": self.mol.get("led_to_success")},
                          sort_keys=True)
        return [head] + [json.dumps(m, sort_keys=True, ensure_ascii=False)
                         for m in self.messages]


def dedup(examples: list[Example]) -> list[Example]:
    """``examples`` without those whose messages are a prefix of (or equal to) another's
    with the same tools; first ones kept, order kept."""
    hashed = [[hashlib.sha256(k.encode()).digest() for k in e.keys()] for e in examples]
    prefixes: set[bytes] = set()
    for keys in hashed:
        running = hashlib.sha256()
        for key in keys[:-1]:
            running.update(key)
            prefixes.add(running.copy().digest())
    kept, seen = [], set()
    for example, keys in zip(examples, hashed, strict=True):
        running = hashlib.sha256()
        for key in keys:
            running.update(key)
        whole = running.digest()
        if whole in prefixes or whole in seen:
            continue
        seen.add(whole)
        kept.append(example)
    return kept


def manifest_path(out: Path) -> Path:
    """Where the manifest of ``out`` goes: ``data.jsonl`` -> ``data.manifest.json``."""
    return out.with_suffix(".manifest.json")


def write(out: Path, examples: Iterable[Example], *, adapter: str, source: dict[str, Any],
          filters: dict[str, Any], counts: dict[str, Any]) -> dict[str, Any]:
    """Write the JSONL file and its manifest (each through a temporary name); the manifest."""
    out = out_file(out)
    chosen = list(examples)
    found = len(chosen)
    if filters.get("dedup", True):
        chosen = dedup(chosen)
    text = "".join(example.line() + "\n" for example in chosen)
    kinds: dict[str, int] = {}
    for example in chosen:
        kinds[example.mol.get("kind", "")] = kinds.get(example.mol.get("kind", ""), 0) + 1
    manifest = {"format": FORMAT, "kind": "mol-sft", "file": out.name,
                "sha256": "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest(),
                "adapter": adapter, "source": source, "filters": filters,
                "examples": len(chosen), "by_kind": kinds, "left_out_as_prefixes": found - len(
                    chosen), **counts, "mol_version": __version__, "created": time.time()}
    write_text(out, text)
    write_text(manifest_path(out), json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return manifest
