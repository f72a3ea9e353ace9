"""An adapter's LoRA weights as the artifact names them (``[adapters.NAME] lora``): where the
engine reads them, their content hash, and the versioned name the engine serves them under.

A LoRA is registered under ``NAME@<first 12 hex of its sha256>`` and never reloaded in
place under one name (vLLM reuses stale prefix-cache blocks after an in-place reload,
vllm#42125; llama.cpp's server reuses its prompt cache across LoRAs, llama.cpp#26207): a
new version of the weights is a new engine name, and the hash is part of the artifact's
digest, so eval results and evolve lineages tell two versions of an adapter apart.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from mol.hcp.digest import canonical_json, digest_file

VERSION_HEX = 12
"""Hex digits of a LoRA's sha256 in its versioned engine name."""


def versioned(name: str, sha256: str) -> str:
    """The engine name of one version of a LoRA: ``NAME@<first 12 hex of sha256>``."""
    return f"{name}@{sha256[:VERSION_HEX]}"


def unversioned(engine_name: str) -> str:
    """The name a versioned engine name was made from (itself when it carries no version)."""
    name, at, version = engine_name.rpartition("@")
    return name if at and len(version) == VERSION_HEX and _is_hex(version) else engine_name


def is_uri(path: str) -> bool:
    """Whether a LoRA's ``path`` is a URI the engine reads (``s3://``, ``hf://``, ...) rather
    than a path on disk."""
    return "://" in path


def local_path(base_dir: Path, path: str) -> Path | None:
    """Where a LoRA lies on this machine (relative paths from the artifact's folder); None
    for a URI."""
    if is_uri(path):
        return None
    return (base_dir / Path(path).expanduser()).resolve()


def content_sha256(path: Path) -> str:
    """A LoRA's content hash (64 hex): of a file's bytes; of a folder (vLLM's and SGLang's
    PEFT layout), of its files' relative paths and hashes, sorted, so that neither where it
    lies nor its timestamps count."""
    if path.is_file():
        return digest_file(path).removeprefix("sha256:")
    entries = sorted((p.relative_to(path).as_posix(), digest_file(p))
                     for p in path.rglob("*") if p.is_file())
    return hashlib.sha256(canonical_json(entries)).hexdigest()


def check(raw: Any, base_dir: Path, problems: list[tuple]) -> dict[str, str]:
    """Each adapter's LoRA hash (computed where the artifact gives none); appends to
    ``problems`` a local LoRA whose content does not match its ``sha256`` and a LoRA mol
    cannot read that gives no ``sha256``. Tolerant of a malformed document."""
    hashes: dict[str, str] = {}
    adapters = raw.get("adapters") if isinstance(raw, dict) else None
    for name, config in (adapters.items() if isinstance(adapters, dict) else ()):
        lora = config.get("lora") if isinstance(config, dict) else None
        if not isinstance(lora, dict) or not isinstance(lora.get("path"), str):
            continue
        declared = lora.get("sha256") if isinstance(lora.get("sha256"), str) else None
        loc = ("adapters", name, "lora")
        where = local_path(base_dir, lora["path"])
        if where is None or not where.exists():
            if declared is None:
                missing = ("is a URI mol cannot read" if where is None
                           else f"was not found (looked for {where})")
                problems.append(((*loc, "path"), f"{lora['path']} {missing}: give its sha256 "
                                 "(mol adapters hash PATH, where the LoRA is)"))
            else:
                hashes[name] = declared
            continue
        actual = content_sha256(where)
        if declared is not None and declared != actual:
            problems.append(((*loc, "sha256"), f"does not match {lora['path']}: its content "
                             f"hashes to {actual}"))
        hashes[name] = declared or actual
    return hashes


def fill(doc: Any, hashes: dict[str, str]) -> None:
    """Set each adapter's computed LoRA hash on the validated document (``HCP``), so that its
    engine name is versioned and the hash enters the digest."""
    for name, sha256 in hashes.items():
        lora = doc.adapters[name].lora
        if lora is not None:
            lora.sha256 = sha256


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)
