"""The catalog checks: the surfaces an A2UI stream builds, message by message, and what must
hold of each at the end of the stream.

While the stream is applied: a surface is created once (until deleted) with a
catalog mol knows, and every other message names a surface that exists. At the
end, for every surface still alive: a component has id ``root``; every child
id names a component of the surface; no component contains itself; every data
binding (``{"path": ...}``) points at a value of the data model, except the
``value`` of an input component, which the user writes. Bindings inside a
template (a child list ``{"componentId", "path"}``) are relative to each item
of the list the template repeats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from mol.genui.a2ui.schemas import Catalog
from mol.genui.report import Problem

MISSING = object()


class Located(NamedTuple):
    """A message and where it is (``line 3``, or ``line 1 message 2`` in a JSON list)."""

    where: str
    message: Any


def pointer(path: list[Any] | tuple[Any, ...]) -> str:
    """A JSON pointer (``/a/0/b``) for a path of keys and indices."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path) or "/"


def resolve(data: Any, path: str) -> Any:
    """The value at JSON pointer ``path`` (``/`` or empty: the whole model), or ``MISSING``."""
    node = data
    for raw in [p for p in path.split("/") if p != ""]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return MISSING
    return node


def assign(data: Any, path: str, value: Any) -> Any:
    """The model with ``value`` at ``path`` (``MISSING`` removes it); the new root. Missing
    objects on the way are created; an index one past a list's end appends."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in path.split("/") if p != ""]
    if not parts:
        return {} if value is MISSING else value
    root = data if isinstance(data, dict | list) else {}
    node = root
    for part, after in zip(parts, [*parts[1:], None], strict=True):
        if isinstance(node, list):
            if not part.isdigit() or int(part) > len(node):
                return root  # not a place in the list: the renderer would ignore it too
            key: Any = int(part)
            if key == len(node):
                node.append({})
        else:
            key = part
        if after is None:
            if value is MISSING:
                if isinstance(node, dict):
                    node.pop(key, None)
                elif key < len(node):
                    node.pop(key)
            else:
                node[key] = value
            return root
        child = node[key] if isinstance(node, list) else node.get(key)
        if not isinstance(child, dict | list):
            child = node[key] = {}
        node = child
    return root


@dataclass
class Surface:
    """One surface as the stream has built it so far."""

    id: str
    catalog: Catalog
    where: str
    components: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    """Component id -> (where it was defined, as ``line N /pointer``; the component)."""
    data: Any = field(default_factory=dict)


@dataclass
class Surfaces:
    """The surfaces of one stream, with the catalogs its protocol offers."""

    catalogs: dict[str, Catalog]
    folder: str
    """The protocol's schema folder (``v0_9``)."""
    live: dict[str, Surface] = field(default_factory=dict)

    def catalog_of(self, surface_id: Any) -> Catalog:
        """The catalog of a surface, or the version's basic catalog when it is unknown."""
        surface = self.live.get(surface_id) if isinstance(surface_id, str) else None
        return surface.catalog if surface else next(iter(self.catalogs.values()))

    def apply(self, item: Located, key: str) -> list[Problem]:
        """Apply one message (already schema-checked) and say what it got wrong."""
        body = item.message.get(key)
        if not isinstance(body, dict) or not isinstance(body.get("surfaceId"), str):
            return []  # the schema check has reported it
        surface_id = body["surfaceId"]
        if key == "createSurface":
            return self._create(item, body)
        if key not in ("updateComponents", "updateDataModel", "deleteSurface"):
            return []
        surface = self.live.get(surface_id)
        if surface is None:
            return [Problem(f"{item.where} /{key}/surfaceId", f"surface {surface_id!r} does not "
                            "exist: send createSurface for it first", "surface")]
        if key == "deleteSurface":
            del self.live[surface_id]
            return []
        if key == "updateDataModel":
            value = body.get("value", MISSING)
            if value is None and self.folder == "v1_0":
                value = MISSING  # v1.0 deletes with an explicit null (its schema says so)
            surface.data = assign(surface.data, str(body.get("path") or "/"), value)
            return []
        return self._components(surface, item, [key], body.get("components"))

    def _create(self, item: Located, body: dict[str, Any]) -> list[Problem]:
        surface_id = body["surfaceId"]
        where = f"{item.where} /createSurface"
        if surface_id in self.live:
            return [Problem(f"{where}/surfaceId", f"surface {surface_id!r} already exists: "
                            "delete it before creating it again", "surface")]
        catalog_id = body.get("catalogId") or next(iter(self.catalogs))
        catalog = self.catalogs.get(catalog_id) if isinstance(catalog_id, str) else None
        if catalog is None:
            return [Problem(f"{where}/catalogId", f"unknown catalog {catalog_id!r}; the "
                            f"renderer has {', '.join(self.catalogs)}", "surface")]
        surface = self.live[surface_id] = Surface(surface_id, catalog, item.where)
        if isinstance(body.get("dataModel"), dict):
            surface.data = body["dataModel"]
        return self._components(surface, item, ["createSurface"], body.get("components"))

    @staticmethod
    def _components(surface: Surface, item: Located, at: list[str],
                    components: Any) -> list[Problem]:
        found, seen = [], set()
        for index, component in enumerate(components if isinstance(components, list) else []):
            if not isinstance(component, dict) or not isinstance(component.get("id"), str):
                continue
            where = f"{item.where} {pointer([*at, 'components', index])}"
            if component["id"] in seen:
                found.append(Problem(f"{where}/id", f"component id {component['id']!r} appears "
                                     "twice in this message", "schema"))
            seen.add(component["id"])
            surface.components[component["id"]] = (where, component)
        return found

    def finish(self) -> list[Problem]:
        """What must hold of every surface alive at the end of the stream."""
        found = []
        for surface in self.live.values():
            if not surface.components:
                continue
            if "root" not in surface.components:
                found.append(Problem(surface.where, f"surface {surface.id!r} has no component "
                                     "with id 'root'", "dangling-child"))
                continue
            found += Tree(surface).check()
        return found


class Tree:
    """The component tree of one surface, walked from ``root``."""

    def __init__(self, surface: Surface) -> None:
        self.surface = surface
        self.problems: list[Problem] = []
        self.written = {path for _, c in surface.components.values()
                        if _type(c) in surface.catalog.inputs
                        for path in [_binding(c.get("value"))] if path}

    def check(self) -> list[Problem]:
        """Dangling children, cycles and bindings to missing data, from ``root``."""
        self._visit("root", None, ())
        return self.problems

    def _visit(self, component_id: str, scopes: list[Any] | None,
               stack: tuple[str, ...]) -> None:
        where, component = self.surface.components[component_id]
        self._bindings(where, component, scopes)
        refs = self.surface.catalog.references.get(_type(component), [])
        for path, child, template in _children(component, refs):
            at = f"{where}{pointer(path)}"
            if child not in self.surface.components:
                self.problems.append(Problem(at, f"child {child!r} is not a component of "
                                     f"surface {self.surface.id!r}", "dangling-child"))
            elif child in stack or child == component_id:
                self.problems.append(Problem(at, f"child {child!r} contains {component_id!r}: "
                                     "a component cannot contain itself", "dangling-child"))
            elif template is None:
                self._visit(child, scopes, (*stack, component_id))
            else:
                items = self._lookup(template, scopes)
                if not items or not all(isinstance(i, list) for i in items):
                    self.problems.append(Problem(at, f"the template's path {template!r} is not "
                                         "a list in the data model", "missing-data"))
                    continue
                self._visit(child, [x for i in items for x in i], (*stack, component_id))

    def _lookup(self, path: str, scopes: list[Any] | None) -> list[Any]:
        """The values ``path`` names: absolute in the model, or relative in each scope."""
        if path.startswith("/") or scopes is None:
            value = resolve(self.surface.data, path)
            return [] if value is MISSING else [value]
        values = [resolve(scope, path) for scope in scopes]
        return [] if any(v is MISSING for v in values) else values

    def _bindings(self, where: str, component: dict[str, Any],
                  scopes: list[Any] | None) -> None:
        for path, bound in _bound_paths(component, ()):
            if bound in self.written or (scopes == [] and not bound.startswith("/")):
                continue  # the user writes it, or an empty template has nothing to check
            if not self._lookup(bound, scopes):
                self.problems.append(Problem(
                    f"{where}{pointer(path)}", f"binds to {bound!r}, which the data model does "
                    "not have: set it with updateDataModel first", "missing-data"))


def _type(component: dict[str, Any]) -> str | None:
    """A component's type name; None when it is not a string (the schema check reports
    that; a list or an object as a key would raise here)."""
    kind = component.get("component")
    return kind if isinstance(kind, str) else None


def _binding(value: Any) -> str | None:
    """The path of a data binding ``{"path": "/x"}``, else None."""
    if isinstance(value, dict) and set(value) == {"path"} and isinstance(value["path"], str):
        return value["path"]
    return None


def _bound_paths(node: Any, at: tuple[Any, ...]):
    """(where, path) of every data binding inside a component."""
    bound = _binding(node)
    if bound is not None:
        yield at, bound
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _bound_paths(value, (*at, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _bound_paths(value, (*at, index))


def _children(component: dict[str, Any], refs: list[tuple[tuple[str, ...], str]]):
    """(path, child id, template path or None) for every child reference."""
    for path, kind in refs:
        for at, value in _at(component, path, ()):
            if kind == "id" and isinstance(value, str):
                yield at, value, None
            elif kind == "list" and isinstance(value, list):
                yield from (((*at, i), c, None) for i, c in enumerate(value)
                            if isinstance(c, str))
            elif kind == "list" and isinstance(value, dict) and \
                    isinstance(value.get("componentId"), str):
                yield (*at, "componentId"), value["componentId"], str(value.get("path", ""))


def _at(node: Any, path: tuple[str, ...], at: tuple[Any, ...]):
    """(where, value) of every value at ``path`` (``*`` runs over an array's items)."""
    if not path:
        yield at, node
    elif path[0] == "*" and isinstance(node, list):
        for index, item in enumerate(node):
            yield from _at(item, path[1:], (*at, index))
    elif isinstance(node, dict) and path[0] in node:
        yield from _at(node[path[0]], path[1:], (*at, path[0]))
