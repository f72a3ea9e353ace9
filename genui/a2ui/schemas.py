"""The official A2UI JSON Schemas, as the npm package ``@a2ui/web_core`` ships them.

No Python package ships the schema files (the PyPI SDKs carry pydantic models),
so they are read from the GenUI cache that ``mol genui setup`` fills: one
``referencing`` registry holds every schema of v0.9 and v1.0 by its ``$id``,
plus the aliases their relative references expect (``catalog.json`` is the
catalog a surface names; the basic catalog's own ``common_types.json``).
Validators are built once per schema folder and message or component type.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from mol.core.errors import GenUISetupError

VERSIONS = {"v0.9": "v0_9", "v1.0": "v1_0"}
"""The A2UI versions mol checks, and their folder in the package."""
TOP_SCHEMA = {"v0_9": "server_to_client.json", "v1_0": "agent_to_renderer.json"}
MESSAGE_TYPES = {
    "createSurface": "CreateSurfaceMessage",
    "updateComponents": "UpdateComponentsMessage",
    "updateDataModel": "UpdateDataModelMessage",
    "deleteSurface": "DeleteSurfaceMessage",
    "callRendererFunction": "CallRendererFunctionMessage",
    "agentFunctionResponse": "AgentFunctionResponseMessage",
}
"""Message key -> its definition in the version's schema (the last two exist in v1.0 only)."""
ENVELOPE = frozenset({"id", "component", "accessibility", "weight", "catalogId", "metadata"})
"""Properties every component may carry, whatever its type (ComponentCommon and the like)."""


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

    def declared(self, kind: str) -> set[str]:
        """The properties a component of type ``kind`` may have (its own and the envelope's)."""
        return set(_properties(self.components[kind])) | ENVELOPE


@dataclass
class Schemas:
    """The schemas of every version, ready to validate with."""

    registry: Any
    catalogs: dict[str, dict[str, Catalog]]
    """Version (``v0.9``) -> catalog id -> catalog."""
    _validators: dict[str, Any] = field(default_factory=dict)

    def validator(self, uri: str) -> Any:
        """A Draft 2020-12 validator of the schema at ``uri`` (with its fragment)."""
        found = self._validators.get(uri)
        if found is None:
            from jsonschema import Draft202012Validator

            found = Draft202012Validator({"$ref": uri}, registry=self.registry)
            self._validators[uri] = found
        return found

    def message(self, version: str, key: str) -> Any:
        """The validator of one message type (``createSurface``) of ``version``."""
        folder = VERSIONS[version]
        return self.validator(f"{base_uri(folder)}{TOP_SCHEMA[folder]}#/$defs/{MESSAGE_TYPES[key]}")

    def component(self, version: str, catalog: Catalog, kind: str) -> Any:
        """The validator of one component type of ``catalog``: the version's ``Component``
        definition with its discriminator applied (v1.0 puts the common envelope there; v0.9
        catalog components carry it themselves)."""
        uri = f"{catalog.id}#/components/{kind}"
        if version == "v0.9":
            return self.validator(uri)
        key = f"{version}:{uri}"
        found = self._validators.get(key)
        if found is None:
            from jsonschema import Draft202012Validator

            common = base_uri(VERSIONS[version]) + "common_types.json#/$defs/ComponentCommon"
            schema = {"allOf": [{"$ref": common}, {"$ref": uri}], "unevaluatedProperties": False}
            found = self._validators[key] = Draft202012Validator(schema, registry=self.registry)
        return found


def load(root: Path) -> Schemas:
    """The schemas under ``root`` (``@a2ui/web_core/src``), cached per folder."""
    return _load(str(root))


@cache
def _load(root: str) -> Schemas:
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    resources: list[tuple[str, Any]] = []
    catalogs: dict[str, dict[str, Catalog]] = {}
    for version, folder in VERSIONS.items():
        where = Path(root) / folder / "schemas"
        if not where.is_dir():
            raise GenUISetupError(f"the A2UI schemas of {version} are missing from {where}: "
                                  "run `mol genui setup`")
        for path in sorted(where.rglob("*.json")):
            if "examples" in path.parts:
                continue
            contents = json.loads(path.read_text(encoding="utf-8"))
            if "$id" in contents:  # the client-to-server event has none and is not needed
                resources.append((contents["$id"], contents))
        basic = json.loads((where / "catalogs" / "basic" / "catalog.json").read_text())
        common = json.loads((where / "common_types.json").read_text())
        # Relative references: "catalog.json" is the surface's catalog, and the basic catalog's
        # "common_types.json" (v1.0) resolves next to the catalog's own $id.
        resources.append((base_uri(folder) + "catalog.json", basic))
        resources.append((basic["$id"].rsplit("/", 1)[0] + "/common_types.json", common))
        catalogs[version] = {basic["catalogId"]: _catalog(basic)}
    registry = Registry().with_resources(
        (uri, DRAFT202012.create_resource(contents)) for uri, contents in resources)
    return Schemas(registry.crawl(), catalogs)


def _catalog(contents: dict[str, Any]) -> Catalog:
    components = contents["components"]
    references = {kind: list(_child_properties(schema, ())) for kind, schema in components.items()}
    inputs = frozenset(kind for kind, schema in components.items()
                       if "value" in _properties(schema))
    return Catalog(contents["catalogId"], components, references, inputs)


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
