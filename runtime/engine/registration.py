"""An artifact's LoRAs against what the running engine serves: which versions it lists,
registering the missing ones, unloading versions left from earlier artifacts.

A version is never reloaded in place (mol.hcp.loras): registering leaves a listed name
alone, and a stale version with requests running or waiting is never unloaded under them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mol.core.errors import UsageError
from mol.hcp.loras import unversioned
from mol.runtime.engine.loras import LoraClient, ServedModel, lora_path


@dataclass(frozen=True)
class AdapterLora:
    """One adapter of the artifact as the engine sees it."""

    adapter: str
    engine_name: str
    """The name the engine serves it under (versioned when it has a ``lora``)."""
    path: str | None
    """Where the engine reads its LoRA (None: no ``lora``)."""
    sha256: str | None
    listed: bool
    """Whether the engine lists ``engine_name``."""
    other_versions: tuple[str, ...]
    """Other versions of it the engine lists (``NAME@<other 12 hex>``)."""


def survey_loras(artifact: Any, served: list[ServedModel]) -> tuple[list[AdapterLora], list[str]]:
    """Each adapter of the artifact against the engine's model list, and the models the
    engine lists that are neither an adapter of the artifact nor a version of one."""
    ids = [model.id for model in served]
    rows, known = [], set()
    for adapter, config in artifact.doc.adapters.items():
        name = artifact.doc.engine_name(adapter)
        others = _other_versions(name, ids)
        known.update({name, *others})
        rows.append(AdapterLora(adapter, name, lora_path(artifact, adapter),
                                config.lora.sha256 if config.lora else None, name in ids,
                                others))
    return rows, [i for i in ids if i not in known]


def _other_versions(name: str, ids: list[str]) -> tuple[str, ...]:
    base = unversioned(name)
    return tuple(i for i in ids if i != name and i != unversioned(i)
                 and unversioned(i) == base)


def with_lora(artifact: Any, names: list[str] | None) -> list[str]:
    """The adapters named (each must exist and have a ``lora``), or all with a ``lora``."""
    adapters = artifact.doc.adapters
    if not names:
        return [a for a, config in adapters.items() if config.lora is not None]
    for name in names:
        if name not in adapters:
            raise UsageError(f"no adapter {name!r} in {artifact.name} (adapters: "
                             f"{', '.join(adapters)})")
        if adapters[name].lora is None:
            raise UsageError(f"adapter {name!r} has no lora: mol registers only an adapter's "
                             "[adapters.NAME] lora = { path = ... }")
    return list(names)


def lora_client(artifact: Any, engine_url: str | None = None) -> LoraClient:
    """The LoRA client of the artifact's engine; a usage error when ``engine.lora_api`` is
    ``none`` (mol cannot register with an engine it has no dialect for)."""
    if artifact.doc.engine.lora_api == "none":
        raise UsageError("engine.lora_api is 'none': set [engine] lora_api = 'vllm', 'sglang' "
                         "or 'llamacpp' to register LoRAs with the running engine")
    return LoraClient.from_artifact(artifact, engine_url)


async def register_loras(artifact: Any, client: LoraClient,
                   adapters: list[str] | None = None) -> list[tuple[str, str]]:
    """Register the adapters' LoRAs the engine does not list yet (all with a ``lora`` when
    ``adapters`` is None): ``(engine name, "registered" | "present")`` each. A listed name
    is left alone (never reloaded in place)."""
    chosen = with_lora(artifact, adapters)  # a bad name is told before the engine is asked
    listed = {model.id for model in await client.served()}
    done = []
    for adapter in chosen:
        name, path = artifact.doc.engine_name(adapter), lora_path(artifact, adapter)
        if name in listed:
            done.append((name, "present"))
            continue
        assert path is not None  # with_lora: every adapter here has one
        await client.load(name, path)
        done.append((name, "registered"))
    return done


async def register_missing(artifact: Any, engine_url: str | None = None) -> list[str]:
    """Register the artifact's LoRAs the engine does not list yet (``mol serve`` with
    ``engine.register_loras``); the engine names registered."""
    done = await register_loras(artifact, lora_client(artifact, engine_url))
    return [name for name, state in done if state == "registered"]


async def unregister_loras(artifact: Any, client: LoraClient, adapters: list[str] | None = None,
                     *, stale: bool = False) -> list[tuple[str, str]]:
    """Unload the adapters' current versions, or (``stale``) the other versions of them the
    engine lists: ``(engine name, "unloaded" | "not registered" | "in use")`` each. A stale
    version the engine reports requests running or waiting for is skipped."""
    chosen = set(with_lora(artifact, adapters))
    rows, _ = survey_loras(artifact, await client.served())
    done = []
    for row in (r for r in rows if r.adapter in chosen):
        if not stale:
            if row.listed:
                await client.unload(row.engine_name)
            done.append((row.engine_name, "unloaded" if row.listed else "not registered"))
            continue
        for version in row.other_versions:
            if await client.in_use(version):
                done.append((version, "in use"))
                continue
            await client.unload(version)
            done.append((version, "unloaded"))
    return done
