"""`ccda clean RUN_DIR`: the resume state of finished steps goes, everything else stays; unfinished and busy steps
keep theirs; the runner's up-to-date checks do not look into resume state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from context_cda import layout as L
from context_cda.errors import InputError
from context_cda.tools.clean import clean, human


def _step(folder: Path, finished: bool = True, resume: tuple[str, ...] = ()) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "table.parquet").write_bytes(b"t" * 10)
    if finished:
        (folder / "manifest.json").write_text(json.dumps({"outputs": {}}))
    for name in resume:
        (folder / name / "sub").mkdir(parents=True)
        (folder / name / "sub" / "state.bin").write_bytes(b"s" * 1000)
    return folder


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    lay = L.RunLayout(run).check()
    _step(lay.step_dir("finetune", target="t", arm="cda", seed=13), resume=("checkpoints",))
    (lay.step_dir("finetune", target="t", arm="cda", seed=13) / "final").mkdir()
    _step(lay.step_dir("augment-part", shard=0), resume=("shards", "cache"))
    _step(lay.step_dir("sample-part", shard=0), resume=("shards", "draws"))
    _step(lay.step_dir("entropy", target="t"), finished=False, resume=("shards",))
    return run


def test_clean_removes_finished_steps_resume_state_only(tmp_path):
    run = _run(tmp_path)
    lay = L.RunLayout(run)
    dry = clean(run, dry_run=True)
    assert dry.freed == 5000 and all(p.exists() for p, _ in dry.removed)  # a dry run removes nothing
    done = clean(run)
    gone = {p.relative_to(run).as_posix() for p, _ in done.removed}
    assert gone == {"finetune/t/cda/seed-13/checkpoints", "augment-parts/part-0/shards", "augment-parts/part-0/cache",
                    "sample-parts/part-0/shards", "sample-parts/part-0/draws"}
    assert done.freed == 5000
    ft = lay.step_dir("finetune", target="t", arm="cda", seed=13)
    assert (ft / "final").is_dir() and (ft / "table.parquet").is_file() and (ft / "manifest.json").is_file()
    # an unfinished step keeps what its resume needs, and says why
    ent = lay.step_dir("entropy", target="t")
    assert (ent / "shards").is_dir()
    assert all("has not finished" in why for _, why in done.kept) and len(done.kept) == 1
    assert clean(run).freed == 0  # nothing left to free


def test_a_step_in_use_keeps_its_resume_state(tmp_path):
    from tests.helpers.lock_holder import other_process_holds

    run = _run(tmp_path)
    ft = L.RunLayout(run).step_dir("finetune", target="t", arm="cda", seed=13)
    with other_process_holds(ft):
        done = clean(run)
    assert (ft / "checkpoints").is_dir() and any("in use" in why for p, why in done.kept if p.name == "checkpoints")


def test_clean_refuses_a_folder_that_is_not_a_run(tmp_path):
    with pytest.raises(InputError, match="not a run folder"):
        clean(tmp_path)


def test_resume_state_is_not_an_input_of_the_up_to_date_check(tmp_path):
    from context_cda.io import path_hash

    folder = _step(tmp_path / "parts" / "part-0", resume=("shards",))
    before = path_hash(tmp_path / "parts", ignore_dirs=L.RESUME_DIRS)
    assert before != path_hash(tmp_path / "parts")  # the plain hash sees the shards
    import shutil

    shutil.rmtree(folder / "shards")
    assert path_hash(tmp_path / "parts", ignore_dirs=L.RESUME_DIRS) == before
    (folder / "table.parquet").write_bytes(b"changed")
    assert path_hash(tmp_path / "parts", ignore_dirs=L.RESUME_DIRS) != before  # real outputs still count


def test_ccda_clean_command(tmp_path, capsys):
    from context_cda.cli import main

    run = _run(tmp_path)
    assert main(["clean", str(run), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would remove" in out and "would free 5.0 kB" in out
    assert main(["clean", str(run)]) == 0
    assert "freed 5.0 kB" in capsys.readouterr().out
    assert human(1_600_000_000) == "1.6 GB" and human(999) == "999 B"
