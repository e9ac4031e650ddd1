"""The layers of the house (docs/architecture.md): ``melo_core`` < ``db`` < ``ui`` < ``pages`` and
``app.py``; a module imports only from its own layer or below, and no module imports itself back
through others. Inside ``melo_core`` the rooms are layered the same way (``ROOMS``, lowest first).

Every import counts, wherever it stands: at the top, inside a function, under ``TYPE_CHECKING``.
Importing names from a package counts as importing its ``__init__``; importing a submodule
(``import a.b``, ``from a import b`` where ``a/b.py`` exists) counts as importing that submodule.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("melo_core", "db", "ui")  # importable: their modules are nodes of the graph
SOURCES_ONLY = ("pages", "app.py")  # they import, nothing imports them
LAYER = {"melo_core": 0, "db": 1, "ui": 2, "pages": 3, "app": 3}
# melo_core's rooms, lowest first. Its top-level modules are the kernel (config, errors, spec,
# metrics, version) under every room, except the front door above them all.
ROOMS = ("kernel", "runtime", "files", "esco", "encoders", "scorers", "linking", "evaluation", "cli", "front")
FRONT_DOOR = {"melo_core", "melo_core.__main__", "melo_core.front_door"}

Graph = dict[str, dict[str, int]]  # module -> {imported module: line of the first such import}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files() -> Iterator[Path]:
    for top in (*PACKAGES, *SOURCES_ONLY):
        path = ROOT / top
        yield from sorted(path.rglob("*.py")) if path.is_dir() else [path]


def imported_modules(path: Path, modules: set[str]) -> Iterator[tuple[str, int]]:
    """The project modules a file imports, with the line of each import."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the importing module's package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in modules:
                    yield submodule, node.lineno
                elif base in modules:
                    yield base, node.lineno


def import_graph() -> Graph:
    files = list(source_files())
    modules = {module_name(p) for p in files if p.parts[len(ROOT.parts)] in PACKAGES}
    graph: Graph = {}
    for path in files:
        edges = graph.setdefault(module_name(path), {})
        for target, line in imported_modules(path, modules):
            if target != module_name(path):
                edges.setdefault(target, line)
    return graph


def layer(module: str) -> int:
    return LAYER[module.split(".")[0]]


def room(module: str) -> str:
    """The room of a melo_core module: its subpackage, "front" for the front door, else "kernel"."""
    if module in FRONT_DOOR:
        return "front"
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (ROOT / "melo_core" / parts[1]).is_dir() else "kernel"


def cycles(graph: Graph) -> list[list[str]]:
    """One cycle (a path back to its start) for each strongly connected group of modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, {})):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [cycle_through(graph, group) for group in groups]


def cycle_through(graph: Graph, group: set[str]) -> list[str]:
    """A shortest path from the group's first module back to itself, inside the group."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph.get(node, {})):
                if target == start:
                    return [*paths[node], start]
                if target in group and target not in paths:
                    paths[target] = [*paths[node], target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a strongly connected group always has one


def describe(graph: Graph, cycle: list[str]) -> str:
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in itertools.pairwise(cycle)) + f" -> {cycle[-1]}"


def test_the_walk_sees_every_kind_of_import() -> None:
    graph = import_graph()
    assert "melo_core.cli.commands" in graph and "db.store" in graph and "pages.2_Link" in graph and "app" in graph
    assert "melo_core.config" in graph["app"]  # from melo_core import config: the submodule
    assert "melo_core.encoders" in graph["melo_core.scorers.dense"]  # names from a package: its __init__
    assert "db.store" in graph["ui.common"]


def test_lower_layers_import_nothing_from_higher_ones() -> None:
    graph = import_graph()
    wrong = [
        f"{module} imports {target} (line {line})"
        for module, targets in sorted(graph.items())
        for target, line in sorted(targets.items())
        if layer(target) > layer(module)
    ]
    assert not wrong, "melo_core < db < ui < pages, app.py; but:\n" + "\n".join(wrong)


def test_every_room_of_melo_core_has_its_place() -> None:
    rooms = {room(module) for module in import_graph() if module.startswith("melo_core")}
    assert rooms == set(ROOMS), f"rooms without a place in ROOMS: {sorted(rooms - set(ROOMS))}"


def test_rooms_of_melo_core_import_nothing_from_higher_ones() -> None:
    graph = import_graph()
    wrong = [
        f"{module} ({room(module)}) imports {target} ({room(target)}, line {line})"
        for module, targets in sorted(graph.items())
        if module.startswith("melo_core")
        for target, line in sorted(targets.items())
        if target.startswith("melo_core") and ROOMS.index(room(target)) > ROOMS.index(room(module))
    ]
    assert not wrong, " < ".join(ROOMS) + "; but:\n" + "\n".join(wrong)


def test_no_import_cycles() -> None:
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(describe(graph, cycle) for cycle in found)


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c", "a"]]),
        ({"a": {"b"}, "b": set(), "c": {"d"}, "d": {"c"}}, [["c", "d", "c"]]),
        ({"a": {"b", "c"}, "b": {"c"}, "c": set()}, []),
    ],
)
def test_cycles_are_found_with_their_path(edges: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles({node: dict.fromkeys(targets, 1) for node, targets in edges.items()}) == expected
