"""The package's import graph, for the architecture rules of tests/unit/test_structure.py.

Every ``import`` and ``from ... import`` statement counts, wherever it stands: at the top, inside a function (a
lazy import runs the moment the function does) or under ``if TYPE_CHECKING:`` (a reader and a type checker follow
it all the same). ``from package import name`` points at ``package.name`` when that is a module, else at the
package's ``__init__``.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path


def module_files(src: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under the package folder ``src`` (its name is the
    package's: ``.../context_cda`` -> ``context_cda``, ``context_cda.train.loop`` ...)."""
    out = {}
    for path in sorted(src.rglob("*.py")):
        if "egg-info" in str(path):
            continue
        parts = (src.name, *path.relative_to(src).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _targets(name: str, is_package: bool, node: ast.AST, top: str, files: Mapping[str, Path]) -> set[str]:
    """The modules of package ``top`` that an import statement of module ``name`` reaches."""
    if isinstance(node, ast.Import):
        wanted = [a.name for a in node.names if a.name == top or a.name.startswith(top + ".")]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = name.split(".") if is_package else name.split(".")[:-1]
            base = base[: len(base) - node.level + 1]
            module = ".".join(base + (node.module.split(".") if node.module else []))
        else:
            module = node.module or ""
        if not (module == top or module.startswith(top + ".")):
            return set()
        # ``from pkg import mod`` reaches the module; ``from pkg import name`` the package's ``__init__``
        wanted = [f"{module}.{a.name}" if f"{module}.{a.name}" in files else module for a in node.names]
    else:
        return set()
    out = set()
    for target in wanted:
        while target not in files and "." in target:
            target = target.rsplit(".", 1)[0]
        if target in files and target != name:
            out.add(target)
    return out


def file_graph(src: Path) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (itself left out)."""
    files = module_files(src)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            graph[name] |= _targets(name, path.name == "__init__.py", node, src.name, files)
    return graph


def unit_of(module: str) -> str:
    """The top-level unit a module belongs to: its top-level package (``context_cda.train``) or, for a module at
    the package's root, the module itself (``context_cda.layout``)."""
    return ".".join(module.split(".")[:2])


def unit_graph(graph: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    """The file graph folded onto top-level units; the root ``__init__`` (the version string) is left out."""
    out: dict[str, set[str]] = defaultdict(set)
    for a, bs in graph.items():
        for b in bs:
            ua, ub = unit_of(a), unit_of(b)
            if ua != ub and "." in ub:
                out[ua].add(ub)
        out[unit_of(a)]
    return dict(out)


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (each a set of nodes that reach each other), each
    sorted; Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    nodes = sorted(set(graph) | {b for bs in graph.values() for b in bs})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
            elif nxt not in index:
                index[nxt] = low[nxt] = len(index)
                stack.append(nxt)
                on_stack.add(nxt)
                work.append((nxt, iter(sorted(graph.get(nxt, ())))))
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
    return sorted(found)


def a_path(graph: Mapping[str, Iterable[str]], members: Iterable[str]) -> list[str]:
    """The shortest closed walk through a cycle's first member (``a -> b -> c -> a``), for a failure message."""
    members = set(members)
    start = min(members)
    parent: dict[str, str] = {}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                walk = [node]
                while walk[-1] != start:
                    walk.append(parent[walk[-1]])
                return [*reversed(walk), start]
            if nxt in members and nxt not in parent:
                parent[nxt] = node
                queue.append(nxt)
    return sorted(members)
