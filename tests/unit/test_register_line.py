"""`ccda register` says the gate's verdict in one line: the four-state verdict, its note and where the version
went; with tracking off the decision is still taken and written (promotion.json) from the per-item evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from tests.helpers.predictions import write_predictions

from context_cda.cli import main
from context_cda.commands.register import register_line
from context_cda.layout import RunLayout


def test_the_register_line_says_the_verdict():
    s = {"model_name": "t-debiased", "version": "3", "promote": False, "verdict": "refused: not shown",
         "note": "underpowered: SS vs vanilla: detectable shift ≥ 14.52 (observed +0.04)"}
    assert register_line(s, "cda") == ("t-debiased v3 (cda): refused: not shown (underpowered: SS vs vanilla: detectable "
                                "shift ≥ 14.52 (observed +0.04)) - kept as candidate")
    assert register_line({**s, "promote": True, "verdict": "promoted", "note": ""}, "cda") == (
        "t-debiased v3 (cda): promoted - promoted to champion")


def test_ccda_register_prints_the_verdict_of_the_evidence(tmp_path, capsys):
    from context_cda.models import resolve_pretrained

    run = tmp_path / "run"
    lay = RunLayout(run).check()
    for arm, (ss, cs) in {"cda": (0.72, 0.70), "context-cda": (0.50, 0.50)}.items():
        ft = lay.step_dir("finetune", target="tg", arm=arm, seed=13)
        (ft / "final").mkdir(parents=True)
        for f in Path(resolve_pretrained("tiny:gpt2")).iterdir():
            if f.is_file():
                (ft / "final" / f.name).write_bytes(f.read_bytes())
        pd.DataFrame([{"epoch": e, "arm": arm, "target": "tg", "stereoset_ss": 60.0} for e in (0, 1)]).to_csv(
            ft / "metrics.csv", index=False)
        write_predictions(lay.evaluation_dir("tg", arm, 13), ss, cs)
    write_predictions(lay.evaluation_dir("tg"), 0.72, 0.70)
    args = ["register", "--run-dir", str(run), "--set", "run.targets={tg: 'tiny:gpt2'}", "--set",
            "train.arms=[cda,context-cda]", "--set", "tracking.enabled=false"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "tg-debiased (cda): refused: not shown (underpowered: SS vs vanilla: detectable shift ≥ " in out, out
    assert "tg-debiased (context-cda): promoted - not registered (tracking off): no alias moved" in out
    rec = json.loads((run / "register" / "tg" / "context-cda" / "promotion.json").read_text())
    assert rec["verdict"] == "promoted" and rec["decision"] == "promoted" and rec["detectable_shift"]["stereoset_ss"] > 0
