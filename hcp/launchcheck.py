"""``mol engine command --check``: the files the launch command names, checked as the engine
will see them (paths under ``--model-root`` when given): the base model's folder, each LoRA,
and each LoRA's content against the artifact's ``sha256``.

The artifact's loader already refuses a local LoRA whose content does not match; this check
matters when the engine reads the files elsewhere: ``--model-root`` relocates them, or the
artifact gives the hash of a path on the engine's machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mol.hcp import loras
from mol.hcp.launch import LoraSite, base_path, lora_sites

PEFT_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
"""The weight files of a PEFT LoRA folder that vLLM and SGLang load (either)."""


@dataclass
class Findings:
    """What the check found: ``problems`` fail it; ``notes`` say what it could not check."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check(artifact: Any, model_root: Path | None) -> Findings:
    """Check every file the launch command names, one line per problem."""
    found = Findings()
    _check_base(artifact.doc, model_root, found)
    for site in lora_sites(artifact, model_root):
        _check_lora(site, found)
    return found


def _check_base(doc: Any, model_root: Path | None, found: Findings) -> None:
    if not doc.model.base:
        found.problems.append("model: the artifact names no base model ([model] base)")
        return
    written = doc.model.base
    if model_root is None and not (written.startswith((".", "~")) or Path(written).is_absolute()):
        found.notes.append(f"model: {written} not checked: without --model-root the engine "
                           "resolves it (a folder of its working directory, or a hub id)")
        return
    where = Path(base_path(doc, model_root)).expanduser()
    if not where.is_dir():
        found.problems.append(f"model: base folder not found: {written} (looked for {where})")
    elif not (where / "config.json").is_file():
        found.problems.append(f"model: base folder has no config.json: {where}")


def _check_lora(site: LoraSite, found: Findings) -> None:
    where = site.local
    if where is None:
        found.notes.append(f"{site.adapter}: not checked: the engine reads {site.path} itself")
        return
    if not where.exists():
        found.problems.append(f"{site.adapter}: lora file not found: {site.written} "
                              f"(looked for {where})")
        return
    if where.is_dir():
        if not (where / "adapter_config.json").is_file():
            found.problems.append(f"{site.adapter}: lora folder has no adapter_config.json: "
                                  f"{where}")
        if not any((where / name).is_file() for name in PEFT_WEIGHTS):
            found.problems.append(f"{site.adapter}: lora folder has no weights "
                                  f"({' or '.join(PEFT_WEIGHTS)}): {where}")
    actual = loras.content_sha256(where)
    if actual != site.sha256:
        kind = "folder" if where.is_dir() else "file"
        found.problems.append(f"{site.adapter}: sha256 mismatch: artifact says {site.sha256}, "
                              f"the {kind} hashes to {actual}")
