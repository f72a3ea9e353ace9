"""Prompt templating: placeholders rendered once, when the artifact loads.

The router, adapter, identity and summary prompts may use

- ``{{ADAPTER_DESCRIPTIONS}}`` (or ``{{LORA_DESCRIPTIONS}}``, the reference proxy's name for
  it): one ``NAME = description`` line per routable adapter, sorted by name (each
  description on one line; from the adapter's ``description``, else from the
  ``router.descriptions`` file, ``mol.hcp.descriptions``);
- ``{{ROUTE_LABELS}}``: the routing labels joined by spaces;
- ``{{MODEL_NAME}}`` and ``{{BASE_MODEL}}``: ``[model] name`` and ``base``.

Anything else between ``{{`` and ``}}`` is a load error naming the file and line. The
rendered texts are computed here once, so every request carries the same bytes.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mol.hcp import descriptions
from mol.hcp.base import FileRef
from mol.hcp.files import prompt_locations, resolve
from mol.hcp.issues import Issue, format_path

PLACEHOLDERS = ("ADAPTER_DESCRIPTIONS", "LORA_DESCRIPTIONS", "ROUTE_LABELS", "MODEL_NAME",
                "BASE_MODEL")
DESCRIBING = ("ADAPTER_DESCRIPTIONS", "LORA_DESCRIPTIONS")
"""The placeholders standing for the adapters' descriptions."""
ALIASES = ("LORA_DESCRIPTIONS",)
"""Placeholders accepted under another name (the reference proxy's), not offered in hints."""
_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)

Locate = Callable[[tuple], "int | None"]
"""The artifact line of a key path (None when unknown)."""


def render_prompts(doc: Any, texts: dict[str, str], base_dir: Path, file: str | None,
                   line_of: Locate) -> tuple[dict[str, str], list[Issue]]:
    """Every prompt of a validated document, rendered (key path -> text), and the problems:
    unknown placeholders, values a placeholder needs that the artifact lacks, and a
    prefill router prompt without its prefill line."""
    described, issues = _described(doc, texts, base_dir, file, line_of)
    values = _values(doc, described)
    prompts: dict[str, str] = {}
    for loc in prompt_locations({"adapters": dict(doc.adapters)}):
        prompt = _at(doc, loc)
        if prompt is None:
            continue
        if isinstance(prompt, FileRef):
            if prompt.path not in texts:  # missing or unreadable: already reported
                continue
            text = texts[prompt.path]
            where = _prompt_file(prompt.path, base_dir, file)
        else:
            text, where = prompt, None
        used, unknown = _scan(text)
        for name, offset in unknown:
            issues.append(_unknown(name, text, offset, loc, where, file, line_of))
        for name in used:
            issues += _missing(name, doc, described, loc, file, line_of)
        prompts[format_path(loc)] = _PLACEHOLDER.sub(
            lambda m: values.get(m.group(1), m.group(0)), text)
    router = prompts.get("router.prompt")
    if doc.router.layout == "prefill" and router is not None and not prefill_split(router)[1]:
        issues.append(Issue(
            "with layout = 'prefill' the router prompt's last line is the assistant prefill "
            "the engine continues, and must end with '=' (e.g. 'model_id=')", file=file,
            line=line_of(("router", "layout")), path="router.layout"))
    return prompts, list(dict.fromkeys(issues))  # a value two prompts need: reported once


def prefill_split(prompt: str) -> tuple[str, str]:
    """A prefill-layout router prompt as ``(instructions, stem)``: everything before its last
    non-empty line, and that line when it ends with ``=`` (else ``""``)."""
    lines = prompt.rstrip().split("\n")
    stem = lines[-1].strip()
    if not stem.endswith("="):
        return prompt, ""
    return "\n".join(lines[:-1]).rstrip(), stem


def adapter_descriptions(doc: Any, described: dict[str, str] | None = None) -> str:
    """``NAME = description`` per routable adapter, sorted, each description on one line
    (``described``: the descriptions file's, for the adapters without their own)."""
    return "\n".join(f"{name} = {' '.join(_description(doc, name, described).split())}"
                     for name in sorted(doc.route_labels) if name in doc.adapters)


def _description(doc: Any, name: str, described: dict[str, str] | None) -> str:
    return doc.adapters[name].description or (described or {}).get(name, "")


def _described(doc: Any, texts: dict[str, str], base_dir: Path, file: str | None,
               line_of: Locate) -> tuple[dict[str, str], list[Issue]]:
    """The ``router.descriptions`` file's descriptions by adapter, and its problems."""
    ref = doc.router.descriptions
    if ref is None:
        return {}, []
    if isinstance(ref, FileRef):
        if ref.path not in texts:  # missing or unreadable: already reported
            return {}, []
        text, where = texts[ref.path], _prompt_file(ref.path, base_dir, file)
    else:
        text, where = ref, file
    found, problems = descriptions.parse(text)
    issues = [Issue(message, file=where, line=line if where != file else
                    line_of(("router", "descriptions")), path="router.descriptions")
              for line, message in problems]
    return {name: entry.description for name, entry in found.items()}, issues


def _values(doc: Any, described: dict[str, str]) -> dict[str, str]:
    listed = adapter_descriptions(doc, described)
    return {"ADAPTER_DESCRIPTIONS": listed, "LORA_DESCRIPTIONS": listed,
            "ROUTE_LABELS": " ".join(doc.route_labels),
            "MODEL_NAME": doc.model.name, "BASE_MODEL": doc.model.base or ""}


def _at(doc: Any, loc: tuple) -> Any:
    value = doc
    for part in loc:
        value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
    return value


def _scan(text: str) -> tuple[set[str], list[tuple[str, int]]]:
    used: set[str] = set()
    unknown: list[tuple[str, int]] = []
    for match in _PLACEHOLDER.finditer(text):
        if match.group(1) in PLACEHOLDERS:
            used.add(match.group(1))
        else:
            unknown.append((match.group(1), match.start()))
    return used, unknown


def _prompt_file(ref: str, base_dir: Path, file: str | None) -> str:
    """The prompt file as a person finds it: beside the artifact file they named."""
    if file is not None and not Path(ref).expanduser().is_absolute():
        return str(Path(file).parent / ref)
    return str(resolve(base_dir, ref))


def _unknown(name: str, text: str, offset: int, loc: tuple, where: str | None,
             file: str | None, line_of: Locate) -> Issue:
    line_in_text = text.count("\n", 0, offset) + 1
    close = difflib.get_close_matches(name.strip(), PLACEHOLDERS, n=1, cutoff=0.6)
    hint = (f"did you mean {{{{{close[0]}}}}}?" if close else
            "known: " + ", ".join(f"{{{{{p}}}}}" for p in PLACEHOLDERS if p not in ALIASES))
    message = f"unknown placeholder {{{{{name}}}}}"
    if where is not None:
        return Issue(message, file=where, line=line_in_text, path=format_path(loc), hint=hint)
    if line_in_text > 1:
        message += f" (line {line_in_text} of the prompt text)"
    return Issue(message, file=file, line=line_of(loc), path=format_path(loc), hint=hint)


def _missing(name: str, doc: Any, described: dict[str, str], loc: tuple, file: str | None,
             line_of: Locate) -> list[Issue]:
    """The values ``{{name}}`` needs that the artifact does not give."""
    user = f"{format_path(loc)} uses {{{{{name}}}}}"
    if name == "BASE_MODEL" and not doc.model.base:
        return [Issue(f"required: {user}", file=file, line=line_of(("model",)),
                      path="model.base")]
    if name not in DESCRIBING:
        return []
    return [Issue(f"required: {user} and {adapter} is routable", file=file,
                  line=line_of(("adapters", adapter)), path=f"adapters.{adapter}.description")
            for adapter in sorted(doc.route_labels)
            if adapter in doc.adapters and not _description(doc, adapter, described).strip()]
