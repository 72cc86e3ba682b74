"""No import circles between the project's modules: each module's imports (at the top or inside a function, where
a circle hides) form a graph with no strongly connected component of two or more modules. A package's __init__
importing its own submodules is a package, not a circle; a submodule importing its package's __init__ back is."""

import ast
from pathlib import Path

from tests.support import REPO

PACKAGES = ("hangdoctor", "weightdiff", "tracing", "slurm", "trainer")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imports(name: str, path: Path, known: dict) -> set[str]:
    def owner(dotted: str) -> str:  # the module that defines dotted (a module, or a name in one)
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {owner(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            found |= {owner(f"{base}.{alias.name}") for alias in node.names}
    return found - {"", name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles: groups of two or more modules each reachable from every other, by reachability sets (a few
    hundred modules: plain breadth-first searches are fast enough)."""
    reach = {}
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            node = todo.pop()
            if node not in seen and node in graph:
                seen.add(node)
                todo.extend(graph[node])
        reach[start] = seen
    groups = {frozenset(n for n in reach[m] if m in reach[n]) | {m} for m in graph if m in reach[m]}
    return sorted(sorted(group) for group in groups if len(group) > 1)


def test_the_checker_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    known = modules()
    assert len(known) > 100
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert cycles(graph) == []
