"""The item engine (context_cda.items): checkpoints per fingerprint, per-item status, the final rows, the error
policy; the behaviour augment, sample and entropy share."""

from __future__ import annotations

import pandas as pd
import pytest

from context_cda import items as I


def row(key, status=I.DONE, reason="", **extra):
    return {I.KEY: key, I.STATUS: status, I.REASON: reason, **extra}


def test_final_rows_take_the_first_final_shard_else_the_latest_error(tmp_path):
    store = I.Checkpoints(tmp_path / "fp")
    store.append([row("a", v=1), row("b", I.ERROR, "HTTP 500", v=1), row("c", I.ERROR, "timeout", v=1)])
    store.append([row("b", I.DONE, v=2), row("c", I.ERROR, "HTTP 429", v=2), row("d", I.REJECTED, "empty", v=2)])
    store.append([row("a", v=3)])  # a duplicate of a final row (two runs racing): ignored, counted
    rows, dup = I.final_rows(store.read(), ["d", "c", "b", "a", "e"])
    assert rows[I.KEY].tolist() == ["d", "c", "b", "a"] and dup == 1  # the keys' order; "e" has no row yet
    assert rows.set_index(I.KEY)["v"].to_dict() == {"d": 2, "c": 2, "b": 2, "a": 1}
    assert rows.set_index(I.KEY).loc["c", I.REASON] == "HTTP 429"
    assert store.final_keys() == {"a", "b", "d"}


def test_an_item_with_several_rows_keeps_them_together_in_order(tmp_path):
    store = I.Checkpoints(tmp_path / "fp")
    store.append([row("x", sample_idx=1), row("x", sample_idx=0), row("y", I.REJECTED, "too-few")])
    store.append([row("x", sample_idx=0, v="late")])
    rows, dup = I.final_rows(store.read(), ["x", "y"], then="sample_idx")
    assert rows[I.KEY].tolist() == ["x", "x", "y"] and rows["sample_idx"].tolist()[:2] == [0, 1] and dup == 1
    assert rows["v"].isna().all()  # the first shard's rows, not the late duplicate


def test_a_pass_skips_finished_items_and_redoes_error_items(tmp_path):
    seen: list[list[str]] = []

    def work(chunk, bar):
        seen.append(list(chunk))
        return [row(k, I.ERROR if k == "c" and len(seen) < 3 else I.DONE) for k in chunk]

    run = I.ItemRun("test", I.Checkpoints.of(tmp_path, "fp"), 2, lambda k: k)
    first = I.run_items(run, ["a", "b", "c", "d", "e"], work)
    assert seen == [["a", "b"], ["c", "d"], ["e"]] and (first.resumed, first.processed, first.shards) == (0, 5, 3)
    second = I.run_items(run, ["a", "b", "c", "d", "e"], work)
    assert seen[-1] == ["c"] and (second.resumed, second.processed) == (4, 1)  # only the error item again
    out = I.Outcome.of("test", run.store, ["a", "b", "c", "d", "e"])
    assert len(out.done) == 5 and len(out.errors) == 0 and len(list((tmp_path / "shards" / "fp").iterdir())) == 4


def test_rows_that_do_not_match_the_chunk_are_refused_before_they_are_written(tmp_path):
    run = I.ItemRun("test", I.Checkpoints.of(tmp_path, "fp"), 2, lambda k: k)
    with pytest.raises(RuntimeError, match="missing \\['b'\\]"):
        I.run_items(run, ["a", "b"], lambda chunk, bar: [row("a")])
    with pytest.raises(RuntimeError, match="unknown status \\['accepted'\\]"):
        I.run_items(run, ["a"], lambda chunk, bar: [row("a", "accepted")])
    assert run.store.files() == []


def test_a_killed_write_leaves_no_shard_and_its_leftovers_are_removed(tmp_path):
    store = I.Checkpoints.of(tmp_path, "fp")
    store.root.mkdir(parents=True)
    (store.root / ".shard-x.parquet.tmp").write_text("half")
    I.run_items(I.ItemRun("t", store, 5, lambda k: k), ["a"], lambda chunk, bar: [row("a")])
    assert [f.name.startswith("shard-") for f in store.root.iterdir()] == [True]


def test_fingerprints_keep_their_own_checkpoints(tmp_path):
    I.Checkpoints.of(tmp_path, "one").append([row("a")])
    assert I.Checkpoints.of(tmp_path, "two").final_keys() == set()
    assert I.Checkpoints.of(tmp_path, "one").final_keys() == {"a"}


def test_the_outcome_splits_by_status_and_writes_the_tables(tmp_path):
    """(The error policy the outcome's errors meet is the step envelope's: test_steps.py.)"""
    store = I.Checkpoints(tmp_path / "fp")
    store.append([row("a", id="a"), row("b", I.REJECTED, "empty-text", id="b"),
                  row("c", I.ERROR, "generator: HTTP 500 (after 6 attempts)", id="c")])
    out = I.Outcome.of("stage[x]", store, ["a", "b", "c"])
    assert (len(out.done), len(out.rejected), len(out.errors)) == (1, 1, 1)
    paths = out.write(tmp_path / "out", out.rejected[["id", I.REASON]], out.errors[["id", I.REASON]])
    assert pd.read_parquet(paths["errors"])["id"].tolist() == ["c"]
    assert pd.read_parquet(paths["rejected"])["id"].tolist() == ["b"]
    assert out.error_reasons() == {"HTTP 500": 1}


def _code_strings_and_calls(path):
    """(string constants that are not docstrings, names of the methods called) in a module."""
    import ast

    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
               and id(n) not in docs]
    calls = [n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    return strings, calls


def test_no_stage_module_keeps_shard_bookkeeping_of_its_own():
    """augment, sample and entropy keep their shards through the engine: no stage module names shard files,
    globs a folder or reads parquet files itself (the checker sees a module that does: the engine)."""
    from pathlib import Path

    src = Path(I.__file__).parent
    for mod in ("augment/stage.py", "augment/store.py", "entropy/samples.py", "entropy/stage.py", "entropy/merge.py",
                "augment/merge.py"):
        strings, calls = _code_strings_and_calls(src / mod)
        assert not [t for t in strings if "shard-" in t], mod
        assert not {"glob", "rglob", "read_parquet"} & set(calls), mod
    strings, calls = _code_strings_and_calls(src / "items.py")
    assert any("shard-" in t for t in strings) and "glob" in calls
