"""A profile folder laid out like the reference MoL proxy's (lora.md, route.md, intro.md,
summary.md), with text of the tests' own, and the artifact ``mol hcp import --from
mol-harness`` makes of it."""

from __future__ import annotations

from pathlib import Path

LORA = """# Specialists

## L0

adapter_name: L0

### Description

small talk and
   plain questions

## L1

adapter_name: L1

### Description

errands for the user

## L2

adapter_name: L2

### Description

code and terminals

## L3

adapter_name: L3

### Description

screens and widgets
"""
ROUTE = """Sort the text above into one label.

{{LORA_DESCRIPTIONS}}

Answer with one of {{ROUTE_LABELS}} only.
model_id=
"""
INTRO = "I am {{MODEL_NAME}}, built on {{BASE_MODEL}}.\n"
SUMMARY = "Tell in one line what you just did.\n"
FILES = {"lora.md": LORA, "route.md": ROUTE, "intro.md": INTRO, "summary.md": SUMMARY}

ROUTE_TEXT = ("Sort the text above into one label.\n\nL0 = small talk and plain questions\n"
              "L1 = errands for the user\nL2 = code and terminals\nL3 = screens and widgets\n\n"
              "Answer with one of L0 L1 L2 L3 only.")
"""route.md as the reference renders it, without its ``model_id=`` line."""
IDENTITY = "I am Macaron-V1-Tall, built on Qwen3.6-35B-A3B."
"""intro.md as the reference renders it."""


def write_profile(root: Path, name: str = "Macaron-V1-Tall", **files: str | None) -> Path:
    """The profile folder ``root/name``; ``files`` replace (None: leave out) its files."""
    folder = root / name
    folder.mkdir(parents=True)
    for file, text in {**FILES, **{k.replace("_", "."): v for k, v in files.items()}}.items():
        if text is not None:
            (folder / file).write_text(text, encoding="utf-8")
    return folder
