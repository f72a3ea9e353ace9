"""The shape of the code: floors, no import cycles, short modules and functions.

The import graph is built with ``ast`` from every module of the code folders,
counting imports inside functions too (a lazy import still ties two modules
together). ``from a.b import c`` is an edge to ``a.b.c`` when that is a module,
else to ``a.b``; a package's ``__init__`` is only a node when something imports
the package itself. Folders sit on the floors ``[tool.mol] floors`` in
pyproject.toml lists: a folder imports only folders on floors below its own, so
the folder-level graph has no cycle either.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOORS: list[list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mol"][
    "floors"]
CODE = tuple(folder for floor in FLOORS for folder in floor)
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def modules(root: Path, folders: tuple[str, ...], prefix: str) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``folders`` of ``root``."""
    found = {}
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([prefix, *parts] if prefix else parts)] = path
    return found


def import_graph(found: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ``found`` it imports (anywhere in its body)."""
    graph: dict[str, set[str]] = {name: set() for name in found}
    for name, path in found.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in found else base
                           for alias in node.names]
            for target in targets:
                while target and target not in found:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def folder_graph(graph: dict[str, set[str]], depth: int = 1) -> dict[str, set[str]]:
    """The import graph between folders: a module's folder is its name's first ``depth``
    parts after the package."""
    def folder(name: str) -> str:
        return ".".join(name.split(".")[1:1 + depth])

    folders: dict[str, set[str]] = {}
    for name, targets in graph.items():
        mine = folders.setdefault(folder(name), set())
        mine.update(folder(t) for t in targets if folder(t) != folder(name))
    return folders


def upward(folders: dict[str, set[str]], floors: Iterable[Iterable[str]]) -> list[str]:
    """Every import of a folder on its own floor or on a floor above, as ``a -> b``."""
    level = {folder: n for n, floor in enumerate(floors) for folder in floor}
    return sorted(f"{a} -> {b}" for a, targets in folders.items() for b in targets
                  if level.get(b, 0) >= level.get(a, 0))


def test_each_folder_imports_only_floors_below_it() -> None:
    graph = import_graph(modules(ROOT, CODE, "mol"))
    folders = folder_graph(graph)
    assert set(folders) == set(CODE)
    assert upward(folders, FLOORS) == []
    assert cycles(folders) == []


def test_the_floors_are_the_packaging_s_folders() -> None:
    """setup.py maps exactly the floors' folders; ruff bans each one's bare import."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    banned = pyproject["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-api"]
    assert set(banned) == set(CODE)
    assert sorted(CODE) == sorted(p.parent.name for p in ROOT.glob("*/__init__.py")
                                  if p.parent.name != "tests")


def test_turn_scheduling_and_http_plumbing_stay_below_the_api_shapes() -> None:
    """The server's three rooms: ``turns`` imports neither ``http`` nor ``api`` (it raises
    ``MolError``s; ``http`` maps them to statuses), and ``http`` does not import ``api``."""
    graph = import_graph(modules(ROOT, CODE, "mol"))
    rooms = {name: targets for name, targets in folder_graph(graph, depth=2).items()
             if name.startswith("server.")}
    floors = [["server.turns"], ["server.http"], ["server.api"], ["server.app"]]
    assert set(rooms) == {"server.turns", "server.http", "server.api", "server.app"}
    assert upward({k: {t for t in v if t.startswith("server.")} for k, v in rooms.items()},
                  floors) == []


def test_eval_the_server_and_acp_drive_the_runtime_through_its_public_names() -> None:
    """``mol.eval``, ``mol.server`` and ``mol.acpagent`` import ``mol.runtime`` itself (its
    ``__all__``, public modules included), never another of its modules: those may move
    without them noticing."""
    import mol.runtime

    graph = import_graph(modules(ROOT, CODE, "mol"))
    public = {f"mol.runtime.{name}" for name in mol.runtime.__all__} & set(graph)
    reaching = sorted(f"{name} -> {target}" for name, targets in graph.items()
                      if name.startswith(("mol.eval.", "mol.server.", "mol.acpagent."))
                      for target in targets
                      if target.startswith("mol.runtime.") and target not in public)
    assert reaching == []
    assert any("mol.runtime" in graph[name] for name in graph if name.startswith("mol.eval."))


def test_one_module_starts_http_servers() -> None:
    """Every server mol runs (``mol serve``, the scripted and local engines, the GenUI
    preview) is started by ``mol.runtime.serving``: no other module names uvicorn's
    ``Server``, ``Config`` or ``run``."""
    starters = {"Server", "Config", "run"}
    found = []
    for path in (p for folder in CODE for p in sorted((ROOT / folder).rglob("*.py"))):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            named = (isinstance(node, ast.Attribute) and node.attr in starters
                     and isinstance(node.value, ast.Name) and node.value.id == "uvicorn") or (
                isinstance(node, ast.ImportFrom) and node.module == "uvicorn"
                and any(alias.name in starters for alias in node.names))
            if named:
                found.append(str(path.relative_to(ROOT)))
    assert sorted(set(found)) == ["runtime/serving.py"]


def test_the_floor_check_finds_a_folder_cycle_and_an_upward_import(tmp_path: Path) -> None:
    toy = tmp_path / "toy"
    for folder, source in [("ground", "def f():\n    from toy.roof import door\n"),
                           ("middle", "from toy.ground import a\n"),
                           ("roof", "from toy.middle import a\ndoor = 1\n")]:
        (toy / folder).mkdir(parents=True)
        (toy / folder / "__init__.py").write_text("")
        (toy / folder / "a.py").write_text(source)
    (toy / "roof" / "door.py").write_text("")
    graph = import_graph(modules(tmp_path, ("toy",), ""))
    folders = {k: v for k, v in folder_graph(graph).items() if k}
    assert folders == {"ground": {"roof"}, "middle": {"ground"}, "roof": {"middle"}}
    assert cycles(folders) == [["ground", "middle", "roof"]]
    floors = [["ground"], ["middle"], ["roof"]]
    assert upward(folders, floors) == ["ground -> roof"]
    (toy / "ground" / "a.py").write_text("x = 1\n")  # the lazy import removed
    folders = {k: v for k, v in folder_graph(import_graph(
        modules(tmp_path, ("toy",), ""))).items() if k}
    assert cycles(folders) == [] and upward(folders, floors) == []


def test_the_code_folders_have_no_import_cycle() -> None:
    graph = import_graph(modules(ROOT, CODE, "mol"))
    assert len(graph) > 50  # the walk really found the code
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_cycle_through_a_function_level_import(tmp_path: Path) -> None:
    toy = tmp_path / "toy"
    (toy / "sub").mkdir(parents=True)
    (toy / "__init__.py").write_text("")
    (toy / "a.py").write_text("from toy.sub import b\n")
    (toy / "sub" / "__init__.py").write_text("")
    (toy / "sub" / "b.py").write_text("def later():\n    from ..c import thing\n")
    (toy / "c.py").write_text("import toy.a\nthing = 1\n")
    (toy / "d.py").write_text("from toy import a\n")  # imports into the cycle, not part of it
    graph = import_graph(modules(tmp_path, ("toy",), ""))
    assert graph["toy.sub.b"] == {"toy.c"}
    assert cycles(graph) == [["toy.a", "toy.c", "toy.sub.b"]]
    (toy / "c.py").write_text("thing = 1\n")
    assert cycles(import_graph(modules(tmp_path, ("toy",), ""))) == []


def test_modules_and_functions_stay_short() -> None:
    files = [path for folder in CODE for path in sorted((ROOT / folder).rglob("*.py"))]
    too_long = []
    for path in files:
        source = path.read_text()
        where = path.relative_to(ROOT)
        if len(source.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{where}: {len(source.splitlines())} lines")
        too_long += [f"{where}: {node.name} ({node.end_lineno - node.lineno + 1} lines)"
                     for node in ast.walk(ast.parse(source))
                     if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                     and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert files and too_long == []
