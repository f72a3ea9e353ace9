"""The official A2UI JSON Schemas, as the npm package ``@a2ui/web_core`` ships them, and the
versions the preview's renderer accepts.

No Python package ships the schema files (the PyPI SDKs carry pydantic models),
so they are read from the GenUI cache that ``mol genui setup`` fills: one
``referencing`` registry holds every schema by its ``$id``, plus the aliases
their relative references expect (``catalog.json`` is the catalog a surface
names; the basic catalog's own ``common_types.json``).

Nothing about the protocols is kept by hand. Each schema folder of the package
(``v0_9``, ``v1_0``) whose agent-to-renderer stream schema (``STREAMS``) declares
a ``version`` is a ``Protocol``: its message types are the ``oneOf`` of that
schema, each ``{version, <key>}``; its versions are the ``version`` values the
renderer accepts for it (``a2ui-renderer.json``, written at setup from the
renderer's own message schema: ``v0.9`` and ``v0.9.1``), or, for a folder no
renderer reads, the ones the schema allows (``v1.0``, which the preview shows
through the v0.9 renderer, ``mol.genui.preview.for_renderer``). The stream
schema is checked with those versions in place of its own ``version`` (the v0.9
file still says ``"const": "v0.9"``). Validators are built once per schema folder
and message or component type.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from mol.core.errors import GenUISetupError

STREAMS = ("server_to_client.json", "agent_to_renderer.json")
"""The file of a schema folder that defines the stream an agent sends (v0.9's name, v1.0's)."""


@dataclass(frozen=True)
class Protocol:
    """One A2UI protocol: a schema folder of the package and what the checks read of it."""

    folder: str
    """The folder in the package (``v0_9``)."""
    stream: str
    """Its stream schema (``server_to_client.json``)."""
    messages: dict[str, str]
    """Message key (``createSurface``) -> its definition in the stream schema."""
    accepts: dict[str, tuple[str, ...]]
    """Message key -> the ``version`` values a message of that type may carry."""
    enveloped: bool
    """Whether the stream schema's own ``Component`` definition carries the common envelope
    (v1.0), rather than each catalog component (v0.9)."""
    rendered: bool
    """Whether the preview's renderer reads this folder's messages as they are."""

    @property
    def versions(self) -> tuple[str, ...]:
        """Every ``version`` value of the protocol's messages, in the order first seen."""
        return tuple(dict.fromkeys(v for values in self.accepts.values() for v in values))


def base_uri(folder: str) -> str:
    """Where the specification places the schemas of a version folder (``v0_9``)."""
    return f"https://a2ui.org/specification/{folder}/"


@dataclass
class Catalog:
    """A component catalog: its id, its component schemas, and what the checks need of them."""

    id: str
    components: dict[str, Any]
    references: dict[str, list[tuple[tuple[str, ...], str]]] = field(default_factory=dict)
    """Component type -> the properties holding child ids: (path, ``id`` or ``list``); ``*``
    in a path stands for every item of an array."""
    inputs: frozenset[str] = frozenset()
    """Component types whose ``value`` the user writes (they have a ``value`` property)."""
    envelope: frozenset[str] = frozenset({"component"})
    """Properties every component may carry, whatever its type: ``component``, the version's
    ``ComponentCommon`` and the catalog's own ``CatalogComponentCommon`` (v0.9's ``weight``)."""

    def declared(self, kind: str) -> set[str]:
        """The properties a component of type ``kind`` may have (its own and the envelope's)."""
        return set(_properties(self.components[kind])) | self.envelope


@dataclass
class Schemas:
    """The schemas of every protocol, ready to validate with."""

    registry: Any
    protocols: dict[str, Protocol]
    """Folder (``v0_9``) -> its protocol."""
    catalogs: dict[str, dict[str, Catalog]]
    """Folder (``v0_9``) -> catalog id -> catalog."""
    _validators: dict[str, Any] = field(default_factory=dict)

    @property
    def versions(self) -> dict[str, Protocol]:
        """Every version a stream may declare -> its protocol, in the package's order."""
        return {v: p for p in self.protocols.values() for v in p.versions}

    def validator(self, uri: str) -> Any:
        """A Draft 2020-12 validator of the schema at ``uri`` (with its fragment)."""
        found = self._validators.get(uri)
        if found is None:
            from jsonschema import Draft202012Validator

            found = Draft202012Validator({"$ref": uri}, registry=self.registry)
            self._validators[uri] = found
        return found

    def message(self, protocol: Protocol, key: str) -> Any:
        """The validator of one message type (``createSurface``) of ``protocol``."""
        return self.validator(f"{base_uri(protocol.folder)}{protocol.stream}#/$defs/"
                              f"{protocol.messages[key]}")

    def component(self, protocol: Protocol, catalog: Catalog, kind: str) -> Any:
        """The validator of one component type of ``catalog``: with the common envelope of
        the protocol's ``Component`` definition where it has one (v1.0; v0.9 catalog
        components carry it themselves)."""
        uri = f"{catalog.id}#/components/{kind}"
        if not protocol.enveloped:
            return self.validator(uri)
        key = f"{protocol.folder}:{uri}"
        found = self._validators.get(key)
        if found is None:
            from jsonschema import Draft202012Validator

            common = base_uri(protocol.folder) + "common_types.json#/$defs/ComponentCommon"
            schema = {"allOf": [{"$ref": common}, {"$ref": uri}], "unevaluatedProperties": False}
            found = self._validators[key] = Draft202012Validator(schema, registry=self.registry)
        return found


def load(root: Path, renderer: Path) -> Schemas:
    """The schemas under ``root`` (``@a2ui/web_core/src``) with the versions the renderer
    accepts (``renderer``, ``Toolchain.a2ui_renderer``), cached per pair of paths."""
    return _load(str(root), str(renderer))


@cache
def _load(root: str, renderer: str) -> Schemas:
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    accepted = _renderer_versions(Path(renderer))
    resources: list[tuple[str, Any]] = []
    protocols: dict[str, Protocol] = {}
    catalogs: dict[str, dict[str, Catalog]] = {}
    for where in sorted(Path(root).glob("*/schemas")):
        stream = next((name for name in STREAMS if (where / name).is_file()), None)
        top = json.loads((where / stream).read_text(encoding="utf-8")) if stream else {}
        protocol = _protocol(where.parent.name, stream or "", top, accepted)
        if protocol is None:
            continue  # v0.8: no versioned messages, nothing mol checks
        protocols[protocol.folder] = protocol
        for path in sorted(where.rglob("*.json")):
            if "examples" in path.parts or path.name == stream:
                continue
            contents = json.loads(path.read_text(encoding="utf-8"))
            if "$id" in contents:  # the client-to-server event has none and is not needed
                resources.append((contents["$id"], contents))
        resources.append((top["$id"], _with_versions(top, protocol)))
        basic = json.loads((where / "catalogs" / "basic" / "catalog.json").read_text())
        common = json.loads((where / "common_types.json").read_text())
        # Relative references: "catalog.json" is the surface's catalog, and the basic catalog's
        # "common_types.json" (v1.0) resolves next to the catalog's own $id.
        resources.append((base_uri(protocol.folder) + "catalog.json", basic))
        resources.append((basic["$id"].rsplit("/", 1)[0] + "/common_types.json", common))
        catalogs[protocol.folder] = {basic["catalogId"]: _catalog(basic, common)}
    for folder in accepted:
        if folder not in protocols:
            raise GenUISetupError(f"the A2UI renderer reads {folder} messages, whose schemas "
                                  f"are missing from {root}: run `mol genui setup`")
    if not protocols:
        raise GenUISetupError(f"no A2UI schemas in {root}: run `mol genui setup`")
    registry = Registry().with_resources(
        (uri, DRAFT202012.create_resource(contents)) for uri, contents in resources)
    return Schemas(registry.crawl(), protocols, catalogs)


def _renderer_versions(path: Path) -> dict[str, dict[str, list[str]]]:
    """Folder -> message key -> the versions the renderer accepts (``renderer.mjs``'s file)."""
    try:
        written = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise GenUISetupError(f"{path} is missing or unreadable: run `mol genui setup`") from None
    return {r["folder"]: r["messages"] for r in written["renderers"].values()}


def _protocol(folder: str, stream: str, top: dict[str, Any],
              accepted: dict[str, dict[str, list[str]]]) -> Protocol | None:
    """The protocol of a schema folder, from its stream schema; None when its messages carry
    no version."""
    definitions = top.get("$defs") or {}
    messages: dict[str, str] = {}
    accepts: dict[str, tuple[str, ...]] = {}
    rendered = accepted.get(folder)
    for choice in top.get("oneOf") or []:
        name = str(choice.get("$ref", "")).rpartition("/")[2]
        message = definitions.get(name) or {}
        version = (message.get("properties") or {}).get("version")
        keys = [k for k in message.get("required") or [] if k != "version"]
        if version is None or len(keys) != 1:
            return None
        messages[keys[0]] = name
        accepts[keys[0]] = tuple(rendered.get(keys[0], ()) if rendered is not None
                                 else _allowed(version))
    if not messages:
        return None
    return Protocol(folder, stream, messages, accepts, "Component" in definitions,
                    rendered is not None)


def _allowed(schema: dict[str, Any]) -> list[str]:
    """The values a schema of a string admits (``const`` or ``enum``)."""
    return [schema["const"]] if "const" in schema else list(schema.get("enum") or [])


def _with_versions(top: dict[str, Any], protocol: Protocol) -> dict[str, Any]:
    """The stream schema with each message's ``version`` being what the protocol accepts."""
    definitions = dict(top["$defs"])
    for key, name in protocol.messages.items():
        message = dict(definitions[name])
        message["properties"] = {**message["properties"],
                                 "version": {"enum": list(protocol.accepts[key])}}
        definitions[name] = message
    return {**top, "$defs": definitions}


def _catalog(contents: dict[str, Any], common: dict[str, Any]) -> Catalog:
    components = contents["components"]
    references = {kind: list(_child_properties(schema, ())) for kind, schema in components.items()}
    inputs = frozenset(kind for kind, schema in components.items()
                       if "value" in _properties(schema))
    envelope = {"component"}
    for where in (common, contents):
        for name in ("ComponentCommon", "CatalogComponentCommon"):
            envelope |= set(((where.get("$defs") or {}).get(name) or {}).get("properties") or {})
    return Catalog(contents["catalogId"], components, references, inputs, frozenset(envelope))


def _properties(schema: dict[str, Any]) -> dict[str, Any]:
    """The properties a component schema declares, inline or in its ``allOf`` parts."""
    found = dict(schema.get("properties") or {})
    for part in schema.get("allOf") or []:
        found.update(part.get("properties") or {})
    return found


def _child_properties(schema: dict[str, Any], prefix: tuple[str, ...]):
    """(path, ``id`` | ``list``) for every property that names child components."""
    for name, prop in _properties(schema).items():
        ref = str(prop.get("$ref", ""))
        if ref.endswith(("/ComponentId", "/Child")):
            yield (*prefix, name), "id"
        elif ref.endswith("/ChildList"):
            yield (*prefix, name), "list"
        elif prop.get("type") == "array" and isinstance(prop.get("items"), dict):
            yield from _child_properties(prop["items"], (*prefix, name, "*"))
