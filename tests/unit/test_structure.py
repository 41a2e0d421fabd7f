"""Code-structure rules the project holds itself to (developers' guide): functions a reader can follow, packages
that do not import each other, and one place that spells the run layout's file names."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "context_cda"
MAX_LINES = 80


def _modules():
    return sorted(p for p in SRC.rglob("*.py") if "egg-info" not in str(p))


def test_no_function_is_longer_than_80_lines():
    long = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, "split these into named steps:\n" + "\n".join(long)


def _package(path: Path) -> str:
    """The top-level unit a module belongs to: its subpackage (``train``) or its own name (``layout``)."""
    rel = path.relative_to(SRC).with_suffix("").parts
    return rel[0]


def _imported(path: Path, node: ast.AST) -> str | None:
    """The top-level unit of ``context_cda`` an import statement names (None: outside the package)."""
    if isinstance(node, ast.ImportFrom):
        if node.level:
            parts = list(path.relative_to(SRC).with_suffix("").parts)
            base = parts[: len(parts) - node.level]
            target = base + (node.module.split(".") if node.module else [node.names[0].name])
            return target[0] if target else None
        if node.module and node.module.startswith("context_cda."):
            return node.module.split(".")[1]
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.startswith("context_cda."):
                return alias.name.split(".")[1]
    return None


def _type_only(tree: ast.AST) -> set[int]:
    """ids of the import statements under ``if TYPE_CHECKING:`` (annotations only: never executed)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def import_graph() -> dict[str, set[str]]:
    """Which top-level units of the package import which, at run time (lazy imports inside functions count;
    imports only for type annotations do not)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in _modules():
        src = _package(path)
        tree = ast.parse(path.read_text())
        skip = _type_only(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            dst = _imported(path, node)
            if dst and dst != src and dst != "__init__":
                edges[src].add(dst)
    return edges


def test_no_two_packages_import_each_other():
    edges = import_graph()
    cycles = sorted({tuple(sorted((a, b))) for a, bs in edges.items() for b in bs if a in edges.get(b, set())})
    assert not cycles, f"packages importing each other: {cycles}"
    assert "io" in edges["train"], "the import walk found nothing"


def test_the_import_check_sees_a_cycle():
    """The checker itself: a fabricated two-way import is reported (so the rule above can fail)."""
    edges = {"a": {"b"}, "b": {"a", "c"}}
    cycles = {tuple(sorted((a, b))) for a, bs in edges.items() for b in bs if a in edges.get(b, set())}
    assert cycles == {("a", "b")}


def test_run_file_names_are_spelled_only_in_the_layout():
    pattern = re.compile(r"valid\.parquet|counterfactuals\.parquet|scores\.parquet")
    hits = []
    for folder in ("src", "components", "pipelines"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == SRC / "layout.py" or "egg-info" in str(path):
                continue
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line):
                    hits.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not hits, "spell these through context_cda.layout:\n" + "\n".join(hits)


def test_tests_read_data_through_the_resolver():
    """Benchmark data is found by dataset name (tests/helpers/data.py: the mirror in $CCDA_DATA_DIR or the data
    cache), never by a path into the workspace's data folder (it moves, and CI points the variable elsewhere)."""
    pattern = re.compile(r"""shared["']?\s*[/,]\s*["']?data\b""")
    hits = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
            for path in sorted((ROOT / "tests").rglob("*.py")) if path != Path(__file__).resolve()
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not hits, "read these through tests/helpers/data.py (mirrored(name)):\n" + "\n".join(hits)


def test_the_data_rule_sees_a_path_into_the_data_folder():
    pattern = re.compile(r"""shared["']?\s*[/,]\s*["']?data\b""")
    assert all(pattern.search(t) for t in ('ROOT.parent / "shared" / "data"', "'../shared/data/x'",
                                           'Path("shared", "data")'))
    assert not pattern.search("shared_data / 'glue'") and not pattern.search("the shared database")


def test_architecture_doc_shows_the_stage_table():
    from context_cda.stages import markdown

    text = (ROOT / "docs" / "architecture.md").read_text()
    begin, end = "<!-- stage-table:begin -->\n", "<!-- stage-table:end -->"
    assert text[text.index(begin) + len(begin): text.index(end)] == markdown(), (
        "docs/architecture.md is stale: run `make docs`")
