"""Every import of `schedules_db`, `schedule_reads`, `tuning` and `service`, read off the
source (function-level and ``TYPE_CHECKING`` ones included, relative ones resolved), and the
graph it makes: cycles between modules, arrows between packages. The rules it is held to are
`tests/test_import_contracts.py`'s."""

from __future__ import annotations

import ast
import functools
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("schedule_reads", "schedules_db", "tuning", "service")
STDLIB = frozenset(sys.stdlib_module_names)


@dataclass(frozen=True)
class Import:
    """One imported module: ``target`` (absolute, dotted), where and how it is imported."""

    module: str  # the importing module
    path: Path
    line: int
    target: str
    function_level: bool
    type_checking: bool

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def source_modules() -> dict[str, Path]:
    """Every module of the checked packages by dotted name (a package by its ``__init__``)."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, in_function: bool, in_tc: bool) -> Iterator[tuple[ast.AST, bool, bool]]:
    """Every node under ``node`` with whether it sits in a function / a TYPE_CHECKING block."""
    for child in ast.iter_child_nodes(node):
        yield child, in_function, in_tc
        function = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield stmt, function, True
                yield from _walk(stmt, function, True)
            for stmt in child.orelse:
                yield stmt, function, in_tc
                yield from _walk(stmt, function, in_tc)
        else:
            yield from _walk(child, function, in_tc)


def imports_of(module: str, path: Path, known: dict[str, Path]) -> Iterator[Import]:
    """The modules ``module`` imports; ``from a import b`` names ``a.b`` when that is a module."""
    is_package = path.name == "__init__.py"
    for node, in_function, in_tc in _walk(ast.parse(path.read_text(), str(path)), False, False):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                parent = parts if is_package else parts[:-1]
                parent = parent[: len(parent) - (node.level - 1)]
                base = ".".join([*parent, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.append(sub if sub in known else base)
        for target in dict.fromkeys(targets):
            yield Import(module, path, node.lineno, target, in_function, in_tc)


@functools.cache
def all_imports() -> list[Import]:
    """Every import of every checked module (read once per test session)."""
    known = source_modules()
    return [imp for module, path in known.items() for imp in imports_of(module, path, known)]


def internal_graph(imports: list[Import]) -> dict[str, dict[str, Import]]:
    """Module -> imported module -> the first import of it, between the checked modules."""
    known = source_modules()
    graph: dict[str, dict[str, Import]] = {m: {} for m in known}
    for imp in imports:
        if imp.target in known and imp.target != imp.module:
            graph[imp.module].setdefault(imp.target, imp)
    return graph


def cycles(graph: dict[str, dict[str, Import]]) -> list[list[Import]]:
    """One cycle (as its import statements) per strongly connected group of modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for node in graph:
        if node not in index:
            visit(node)
    return [_cycle_in(sorted(group), graph) for group in groups]


def _cycle_in(group: list[str], graph: dict[str, dict[str, Import]]) -> list[Import]:
    """A shortest cycle through the group's first module (breadth-first, inside the group)."""
    start, members = group[0], set(group)
    came: dict[str, Import] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt, imp in graph[node].items():
                if nxt == start:
                    path = [imp]
                    while path[0].module != start:
                        path.insert(0, came[path[0].module])
                    return path
                if nxt in members and nxt not in came:
                    came[nxt] = imp
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start}")


def unit(name: str) -> str:
    """The package an arrow is drawn between: a top-level package, `service.<sub>`, or the
    top-level name of a third-party library."""
    parts = name.split(".")
    if parts[0] == "service":
        return ".".join(parts[:2])
    return parts[0]


def arrows(imports: list[Import]) -> dict[tuple[str, str], tuple[int, int]]:
    """(from package, to package) -> (import statements, of which deferred: in a function or
    under ``TYPE_CHECKING``); stdlib and arrows inside a package left out."""
    counts: Counter[tuple[str, str]] = Counter()
    deferred: Counter[tuple[str, str]] = Counter()
    for imp in imports:
        if imp.target.split(".")[0] in STDLIB:
            continue
        arrow = (unit(imp.module), unit(imp.target))
        if arrow[0] != arrow[1]:
            counts[arrow] += 1
            deferred[arrow] += imp.function_level or imp.type_checking
    return {arrow: (count, deferred[arrow]) for arrow, count in sorted(counts.items())}


def describe(cycle: list[Import]) -> str:
    return "; ".join(f"{imp.module} -> {imp.target} ({imp.where()})" for imp in cycle)
