"""``mol hcp import --from mol-harness DIR``: an artifact that runs a reference MoL proxy
profile (MindLab-Research/Mixture-of-LoRA-Harness, one folder per public model) as the
reference runs it.

The profile's four files are used byte for byte, through file references relative to
where the artifact is written; none of their text is copied into the TOML:

- ``route.md`` -> ``router.prompt`` (``layout = "prefill"``: its last line, ``model_id=``,
  is the assistant prefill; ``quote_turn = false``: the turn goes in as written);
- ``lora.md`` -> ``router.descriptions`` (its ``## NAME`` sections declare the adapters,
  their ``### Description`` fill ``{{LORA_DESCRIPTIONS}}``, ``adapter_name:`` the engine
  names);
- ``intro.md`` -> ``[model] identity`` (answer and summary hops, never the route hop);
- ``summary.md`` -> ``summary.prompt`` (the turn's trace, then the prompt).

The reference's numbers come with them (``REFERENCE``): greedy decoding on every hop,
24 route tokens, 192 summary tokens, 131,072 answer tokens; the router adapter ``L0``; a
routed adapter the engine has not loaded falls back on ``L1``, a failed route on ``L2``
(the default the route prompt names). The mapping table: docs/hcp.md, "Importing the
reference profiles".
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mol.core.errors import HCPError
from mol.hcp import descriptions
from mol.hcp.importer import Imported
from mol.hcp.issues import Issue

FILES = ("lora.md", "route.md", "intro.md", "summary.md")
"""A reference profile folder's files, all required."""
BASES = {"Macaron-V1-Venti": "GLM-5.2", "Macaron-V1-Tall": "Qwen3.6-35B-A3B"}
"""The reference's public models and their base models (``{{BASE_MODEL}}``)."""
REFERENCE: dict[str, Any] = {
    "router_adapter": "L0", "route_max_tokens": 24, "summary_max_tokens": 192,
    "answer_max_tokens": 131072, "temperature": 0.0, "fallback": "L2",
    "unavailable_fallback": "L1", "affinity_header": "X-SMG-Routing-Key",
}
"""The reference proxy's settings for its hops (its defaults, read from its source)."""


def from_harness(folder: Path, out_dir: Path, base: str | None = None) -> Imported:
    """The artifact for the profile in ``folder``, its file references relative to
    ``out_dir``; ``base`` names the base model when the folder's name is not one of the
    reference's models."""
    from mol.hcp.loader import load_dict

    files = _files(folder)
    text = files["lora.md"].read_text(encoding="utf-8")
    found, problems = descriptions.parse(text)
    if problems:
        raise HCPError([Issue(message, file=str(files["lora.md"]), line=line)
                        for line, message in problems])
    names = sorted(found)
    doc = _document(folder.resolve().name, names, found, base,
                    {name: _rel(path, out_dir) for name, path in files.items()})
    report = Imported(artifact=None)
    report.mapped += [f"{files['route.md']}: router.prompt (prefill layout, turn unquoted)",
                      f"{files['lora.md']}: router.descriptions, adapters {', '.join(names)}",
                      f"{files['intro.md']}: model.identity",
                      f"{files['summary.md']}: summary.prompt"]
    report.artifact = load_dict(doc, base_dir=out_dir, file="<imported>")
    return report


def _files(folder: Path) -> dict[str, Path]:
    if not folder.is_dir():
        raise HCPError([Issue("not a folder: a reference profile is a folder holding "
                              + ", ".join(FILES), file=str(folder))])
    missing = [name for name in FILES if not (folder / name).is_file()]
    if missing:
        raise HCPError([Issue(f"file not found: {name} (a reference profile folder holds "
                              f"{', '.join(FILES)})", file=str(folder / name))
                        for name in missing])
    return {name: folder / name for name in FILES}


def _rel(path: Path, out_dir: Path) -> str:
    return Path(os.path.relpath(path.resolve(), out_dir.resolve())).as_posix()


def _document(model: str, names: list[str], found: dict[str, descriptions.Described],
              base: str | None, refs: dict[str, str]) -> dict[str, Any]:
    ref = REFERENCE
    router: dict[str, Any] = {
        "prompt": {"path": refs["route.md"]}, "descriptions": {"path": refs["lora.md"]},
        "layout": "prefill", "quote_turn": False, "labels": names,
        "adapter": ref["router_adapter"] if ref["router_adapter"] in names else names[0],
        "max_tokens": ref["route_max_tokens"]}
    for key in ("fallback", "unavailable_fallback"):
        if ref[key] in names:
            router[key] = ref[key]
    adapters: dict[str, Any] = {}
    for name in names:
        table: dict[str, Any] = {"params": {"temperature": ref["temperature"],
                                            "max_tokens": ref["answer_max_tokens"]}}
        engine_name = found[name].engine_name
        if engine_name and engine_name != name:
            table["engine_name"] = engine_name
        adapters[name] = table
    public: dict[str, Any] = {"name": model, "identity": {"path": refs["intro.md"]}}
    if base or model in BASES:
        public["base"] = base or BASES[model]
    return {
        "schema_version": 2, "name": model[:128],
        "description": f"the reference MoL proxy's profile {model} (mol hcp import)",
        "engine": {"affinity_header": ref["affinity_header"]},
        "router": router, "adapters": adapters,
        "summary": {"prompt": {"path": refs["summary.md"]}, "input": "trace",
                    "adapter": "answering", "when": "eager",
                    "max_tokens": ref["summary_max_tokens"]},
        "views": {"others": "user+summary"},
        "model": public,
    }
