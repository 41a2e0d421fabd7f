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


def _cycle_report(graph: dict[str, set[str]]) -> list[str]:
    from tests.helpers.imports import a_path, cycles

    return [" -> ".join(a_path(graph, c)) + f"  ({len(c)} in the circle)" for c in cycles(graph)]


def test_no_import_cycle_among_the_files():
    """No file imports itself through others: every import counts, at the top, inside a function (lazy) or under
    ``if TYPE_CHECKING:`` (a reader follows it all the same). Break a circle by moving the shared thing down to
    where both can import it, not by making an import lazy."""
    from tests.helpers.imports import file_graph

    graph = file_graph(SRC)
    assert "context_cda.layout" in graph["context_cda.steps"], "the import walk found nothing"
    found = _cycle_report(graph)
    assert not found, "files that import each other:\n" + "\n".join(found)


def test_no_loop_through_the_packages():
    """No loop between the top-level rooms (a package such as ``train``, or a module at the root such as
    ``layout``), of any length and through any file of theirs (test_no_two_packages_import_each_other sees pairs)."""
    from tests.helpers.imports import file_graph, unit_graph

    found = _cycle_report(unit_graph(file_graph(SRC)))
    assert not found, "packages that reach each other:\n" + "\n".join(found)


#: the run contract: the root modules every door and stage shares; they import only each other (the floor)
CONTRACT = {"arms", "attributes", "config", "errors", "io", "items", "layout", "runtime", "schemas", "stages",
            "steps"}
#: the root's wiring: the CLI and the local runner, which put the stages together (DESIGN.md)
WIRING = {"cli", "pipeline"}


def _declared(doc: str) -> set[str]:
    """The units a package's docstring lets it import: its ``May import:`` line, ``the run contract`` expanded,
    parenthesised remarks dropped."""
    line = next((ln for ln in doc.splitlines()[:3] if ln.startswith("May import:")), None)
    assert line is not None, "the docstring's second line says what the package may import ('May import: ...')"
    named = set()
    for item in re.sub(r"\([^)]*\)", "", line.removeprefix("May import:")).rstrip(". ").split(","):
        item = item.strip()
        named |= CONTRACT if item == "the run contract" else {item}
    return named


def test_the_root_holds_the_run_contract_and_the_cli_only():
    """The lobby: at most 15 modules at the root, each of them the run contract or its wiring; every other module
    lives in the package of the stage it serves, or under tools/."""
    root = sorted(p.stem for p in SRC.glob("*.py") if p.stem != "__init__")
    assert len(root) + 1 <= 15, f"{len(root) + 1} modules at the root: {root}"
    assert set(root) == (CONTRACT - {"runtime"}) | WIRING, (
        f"not the run contract nor its wiring: {sorted(set(root) - CONTRACT - WIRING)}")


def test_every_package_says_what_it_owns_and_imports_no_more():
    """Each package's ``__init__`` opens with two lines: what it owns, and ``May import: ...`` - the contract's
    modules and the packages it may use. The imports of its files (lazy and type-only included) stay within that,
    and the run contract imports nothing but itself."""
    from tests.helpers.imports import file_graph, unit_graph

    graph = {a.split(".", 1)[1]: {b.split(".", 1)[1] for b in bs}
             for a, bs in unit_graph(file_graph(SRC)).items() if "." in a}
    wrong = []
    for init in sorted(SRC.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        extra = graph.get(init.parent.name, set()) - _declared(doc)
        wrong += [f"{init.parent.name} imports {u}, which its docstring does not name" for u in sorted(extra)]
    for module in sorted(CONTRACT):
        wrong += [f"{module} (the run contract) imports {u}" for u in sorted(graph.get(module, set()) - CONTRACT)]
    assert not wrong, "\n".join(wrong)


def _house(text: str) -> list[list[str]]:
    """The rooms of docs/architecture.md's picture of the house, bottom row first, left to right (``contract``:
    the root's modules; other rows: the ``name/`` and ``name.py`` rooms of src/context_cda, remarks in brackets
    left out)."""
    block = text.split("## The house", 1)[1].split("```", 2)[1]
    rows = []
    for line in block.strip().splitlines()[::-1]:
        kind, rest = line.split(None, 1)
        rest = re.sub(r"\([^)]*\)", "", rest)
        rows.append([w.rstrip("/") for w in rest.split()] if kind == "contract"
                    else re.findall(r"([a-z_]+)(?:/|\.py)", rest))
    return rows


def _against_the_house(graph: dict[str, set[str]], rows: list[list[str]]) -> list[str]:
    place = {room: (r, c) for r, row in enumerate(rows) for c, room in enumerate(row)}
    wrong = [f"{u} is not in the picture" for u in sorted(graph) if u not in place]
    for a, bs in sorted(graph.items()):
        for b in sorted(bs):
            if a in place and b in place and place[b] >= place[a] and not (rows[0].count(a) and rows[0].count(b)):
                wrong.append(f"{a} imports {b}, which the picture puts above it or to its right")
    return wrong


def test_the_house_in_the_architecture_doc_is_the_import_graph():
    """docs/architecture.md opens with the house's layers; every room imports only rooms below it or to its left
    in its row (the contract's modules import each other freely), and every package and root module is in it."""
    from tests.helpers.imports import file_graph, unit_graph

    graph = {a.split(".", 1)[1]: {b.split(".", 1)[1] for b in bs}
             for a, bs in unit_graph(file_graph(SRC)).items() if "." in a and a != "context_cda.resources"}
    rows = _house((ROOT / "docs" / "architecture.md").read_text())
    assert {"layout", "steps"} <= set(rows[0]) and "cli" in rows[-1]
    assert not _against_the_house(graph, rows), "\n".join(_against_the_house(graph, rows))


def test_the_house_rule_sees_an_import_upward():
    rows = [["errors", "io"], ["data", "models"], ["evaluate"]]
    assert _against_the_house({"models": {"evaluate"}, "io": {"errors"}}, rows) == [
        "models imports evaluate, which the picture puts above it or to its right"]
    assert _against_the_house({"data": {"models"}}, rows) == [
        "data imports models, which the picture puts above it or to its right"]
    assert _against_the_house({"train": set()}, rows) == ["train is not in the picture"]


def test_the_declared_imports_rule_sees_an_undeclared_one():
    assert _declared("Owns x.\nMay import: the run contract, data (its probes), models.") == CONTRACT | {"data", "models"}
    graph = {"scoring": {"models", "tracking", "layout"}}
    assert graph["scoring"] - _declared("S.\nMay import: the run contract, models.") == {"tracking"}


def _plant(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "context_cda"
    for rel, text in {"__init__.py": "", **files}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    return pkg


def test_the_cycle_checks_see_a_planted_circle_of_three_files_and_a_loop_through_packages(tmp_path):
    """The checkers themselves: a circle of three files closed by a lazy and a type-only import, and a loop through
    three packages made of imports that are no circle among files, are both reported."""
    from tests.helpers.imports import cycles, file_graph, unit_graph

    pkg = _plant(tmp_path / "files", {
        "a.py": "from . import b\n",
        "b.py": "def f():\n    from .c import g\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import X\n",
        "d.py": "from .a import X\n",
    })
    assert cycles(file_graph(pkg)) == [["context_cda.a", "context_cda.b", "context_cda.c"]]
    pkg = _plant(tmp_path / "rooms", {
        "x/__init__.py": "", "x/one.py": "from ..y.two import f\n", "x/three.py": "",
        "y/__init__.py": "", "y/two.py": "from ..z import g\n",
        "z/__init__.py": "from ..x.three import h\n",
    })
    graph = file_graph(pkg)
    assert cycles(graph) == []
    assert cycles(unit_graph(graph)) == [["context_cda.x", "context_cda.y", "context_cda.z"]]
    assert "x -> context_cda.y" in " -> ".join(_cycle_report(unit_graph(graph))).replace("context_cda.x", "x")


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


#: what only the step envelope (context_cda.steps) does: lock a step folder, write or name the up-to-date marker,
#: apply the item-error policy, hold the SIGTERM guard around a stage
ENVELOPE_CALLS = {"file_lock": "takes a step folder's lock", "check_item_errors": "applies the item-error policy",
                  "sigterm_raises": "holds the SIGTERM guard"}
ENVELOPE_NAMES = {"MARKER": "names the up-to-date marker", "LOCK_FILE": "names the step lock file"}
#: modules that may: the envelope, where the lock and the policy are defined, the run layout (the lock file's name),
#: and the CLI's process-wide SIGTERM guard (a stop outside any step: planning, pre-flight)
ENVELOPE_HOMES = {"steps.py", "io.py", "errors.py", "runtime/signals.py", "layout.py", "cli.py"}


def envelope_breaches(path: Path, text: str) -> list[str]:
    """Where ``text`` (module ``path``) does what only the step envelope may do."""
    out = []
    for node in ast.walk(ast.parse(text)):
        name = None
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in ENVELOPE_CALLS:
                out.append(f"{path}:{node.lineno} {ENVELOPE_CALLS[name]} ({name})")
        elif isinstance(node, ast.Name | ast.Attribute):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name in ENVELOPE_NAMES:
                out.append(f"{path}:{node.lineno} {ENVELOPE_NAMES[name]} ({name})")
        elif isinstance(node, ast.Constant) and node.value in (".ccda-step.json", ".ccda-lock"):
            out.append(f"{path}:{node.lineno} spells {node.value}")
    return out


def test_only_the_step_envelope_locks_marks_and_guards_a_step():
    """One envelope for every door (issue: the lock was taken in six places): the runner, the stage commands, DVC
    and the Kubeflow components run each step through context_cda.steps.run, and nothing else locks a step folder,
    writes the marker, applies the item-error policy or holds the SIGTERM guard."""
    found = []
    for folder in ("src", "components", "pipelines"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "egg-info" in str(path) or (path.is_relative_to(SRC) and str(path.relative_to(SRC)) in ENVELOPE_HOMES):
                continue
            found += envelope_breaches(path.relative_to(ROOT), path.read_text())
    assert not found, "leave these to context_cda.steps:\n" + "\n".join(found)


def test_the_envelope_check_sees_a_breach():
    """The checker itself: a stage body that locks its folder and writes the marker is reported."""
    body = ("from ..io import file_lock\nfrom .. import layout as L\n"
            "def run_x(config, inputs, out):\n    with file_lock(out / L.LOCK_FILE, 'x'):\n"
            "        write_json(out / '.ccda-step.json', {})\n")
    found = envelope_breaches(Path("src/context_cda/x.py"), body)
    assert len(found) == 3 and any("lock" in f for f in found) and any(".ccda-step.json" in f for f in found)
