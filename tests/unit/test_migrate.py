"""`ccda migrate`: a layout-2 run folder (samples drawn per target) brought to layout 3 in place, outputs kept."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))

from cda_table import openai_config, write_cda_table  # noqa: E402
from test_augment_stage import ScriptedGenerator  # noqa: E402

from context_cda import layout as L  # noqa: E402
from context_cda.augment import run_augment  # noqa: E402
from context_cda.errors import ConfigError  # noqa: E402
from context_cda.tools.migrate import migrate_run  # noqa: E402


def layout_2_folder(tmp_path):
    """A run folder as layout 2 left it: a finished augment part (its shards flat in shards/, accepted rows
    'accepted'), the per-target entropy parts, the downstream outputs."""
    run = tmp_path / "run"
    cfg = openai_config("http://127.0.0.1:9/v1", run)
    src = write_cda_table(tmp_path / "cda.parquet", 6)
    part = run / "augment-parts" / "part-0"
    run_augment(cfg, {"counterfactuals": src}, part, generator=ScriptedGenerator())
    files = list((part / "shards").glob("*/shard-*.parquet"))
    for f in files:  # back to layout 2's flat store and vocabulary
        df = pd.read_parquet(f)
        df["status"] = df["status"].replace({"done": "accepted"})
        df.to_parquet(part / "shards" / f.name)
    for folder in {f.parent for f in files}:
        shutil.rmtree(folder)
    (run / "entropy-parts" / "t" / "part-0" / "samples").mkdir(parents=True)
    (run / "filter" / "t" / "k30").mkdir(parents=True)
    (run / "filter" / "t" / "k30" / "corpus.parquet").write_text("kept")
    (run / L.LAYOUT_FILE).write_text(json.dumps({"layout_version": 2}))
    return cfg, src, run


def test_a_layout_2_folder_is_refused_with_the_migration_command(tmp_path):
    cfg, _, run = layout_2_folder(tmp_path)
    with pytest.raises(ConfigError, match=r"uses run layout 2, .*`ccda migrate --run-dir .*run`"):
        L.RunLayout(run).check()


def test_migrate_keeps_the_outputs_and_the_augment_part_resumes(tmp_path):
    cfg, src, run = layout_2_folder(tmp_path)
    dry = migrate_run(cfg, dry_run=True)
    assert dry["from"] == 2 and len(dry["actions"]) == 2 and L.RunLayout(run).version() == 2  # nothing changed
    done = migrate_run(cfg)
    assert done["to"] == 3 and L.RunLayout(run).check().version() == 3
    assert not (run / "entropy-parts").exists() and (run / "filter" / "t" / "k30" / "corpus.parquet").is_file()
    gen = ScriptedGenerator()
    s = run_augment(cfg, {"counterfactuals": src}, run / "augment-parts" / "part-0", generator=gen)
    assert gen.prompts == 0 and s["resumed_items"] == 6 and s["accepted"] == 6  # nothing generated again
    assert migrate_run(cfg)["actions"] == []  # a second migration has nothing to do


def test_migrate_refuses_layout_1(tmp_path):
    cfg = openai_config("http://127.0.0.1:9/v1", tmp_path / "run")
    (tmp_path / "run" / "ingest").mkdir(parents=True)
    with pytest.raises(ConfigError, match="layout 1 cannot be migrated.*start a new run folder"):
        migrate_run(cfg)


def test_the_migrate_command(tmp_path, capsys):
    from context_cda.cli import main

    cfg, _, run = layout_2_folder(tmp_path)
    params = tmp_path / "params.yaml"
    params.write_text(json.dumps(cfg.to_dict()))
    assert main(["migrate", "--params", str(params), "--dry-run"]) == 0
    assert "would remove" in capsys.readouterr().out and L.RunLayout(run).version() == 2
    assert main(["migrate", "--params", str(params)]) == 0
    assert "layout 2 -> 3" in " ".join(capsys.readouterr().out.split()) and L.RunLayout(run).version() == 3
