"""The report and the model registry say the same thing: each version's decision is its registry tag, its aliases
are the ones the registry holds (``candidate`` moves to the newest version), in one vocabulary
(context_cda.tracking.decisions); and the report in MLflow is complete: every image it shows and every table."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("mlflow")
pytest.importorskip("matplotlib")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))

from predictions import write_entropy_scores, write_predictions  # noqa: E402

from context_cda.config import Config  # noqa: E402
from context_cda.layout import RunLayout  # noqa: E402
from context_cda.tracking import decisions as D  # noqa: E402

pytestmark = pytest.mark.services
METRICS = {"stereoset_ss": 60.0, "stereoset_lms": 90.0, "stereoset_icat": 72.0, "crows_cs": 58.0}
# arm -> (StereoSet share, CrowS share) of its per-item predictions; vanilla: 0.75 / 0.72
ARMS = {"cda": (0.50, 0.50), "context-cda": (0.50, 0.50), "context-cda-nofilter": (0.90, 0.88)}


def _model(folder: Path) -> None:
    from context_cda.models import resolve_pretrained

    folder.mkdir(parents=True, exist_ok=True)
    for f in Path(resolve_pretrained("tiny:gpt2")).iterdir():
        if f.is_file():
            (folder / f.name).write_bytes(f.read_bytes())


def _run(tmp_path: Path) -> Config:
    run = tmp_path / "runs" / "r"
    lay = RunLayout(run).check()
    cfg = Config.model_validate({"run": {"run_dir": str(run), "targets": {"tg": "tiny:gpt2"}},
                                 "train": {"arms": list(ARMS), "k": 30},
                                 "tracking": {"uri": f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}"}})
    for arm, (ss, cs) in ARMS.items():
        ft = lay.step_dir("finetune", target="tg", arm=arm, seed=13)
        _model(ft / "final")
        pd.DataFrame([{"epoch": e, "arm": arm, "target": "tg", **METRICS} for e in (0, 1)]).to_csv(
            ft / "metrics.csv", index=False)
        write_predictions(lay.evaluation_dir("tg", arm, 13), ss, cs)
    write_predictions(lay.evaluation_dir("tg"), 0.75, 0.72)
    write_entropy_scores(lay.step_dir("entropy", target="tg"))  # for the report's semantic-entropy histogram
    (run / "filter" / "tg" / "k30").mkdir(parents=True)
    return cfg


def _decisions_table(md: str) -> list[dict[str, str]]:
    section = md.split("## Registry decisions")[1].split("\n## ")[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| tg |")]
    cells = [[c.strip() for c in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in rows]
    return [{"arm": c[1], "model": c[2], "version": c[3], "decision": c[4].strip("*"), "verdict": c[5],
             "aliases": c[6]} for c in cells]


def test_the_report_says_what_the_registry_holds(tmp_path):
    from mlflow.tracking import MlflowClient

    from context_cda.report import run_report
    from context_cda.stages import step_inputs
    from context_cda.tracking import run_register_target, tracking_uri

    cfg = _run(tmp_path)
    run = cfg.run_dir()
    run_register_target(cfg, step_inputs(cfg, "register", target="tg"), run / "register" / "tg", "tg")
    summary = run_report(cfg, step_inputs(cfg, "report"), run / "report")
    md = (run / "report" / "report.md").read_text()
    rows = _decisions_table(md)
    client = MlflowClient(tracking_uri=tracking_uri(cfg), registry_uri=tracking_uri(cfg))
    assert [r["version"] for r in rows] == ["1", "2", "3"]
    for r in rows:
        mv = client.get_model_version(r["model"], r["version"])
        assert r["decision"] == mv.tags[D.DECISION_TAG]
        assert r["verdict"] == D.verdict_line(mv.tags[D.VERDICT_TAG], mv.tags[D.NOTE_TAG]).replace("|", "\\|")
        assert set(filter(None, r["aliases"].replace("none", "").split(", "))) == set(mv.aliases)
    # v1 (less biased than vanilla) promoted; v2 (no better than v1) not shown better; v3 (more biased) worse
    assert [r["decision"] for r in rows] == [D.PROMOTED, D.REFUSED, D.REFUSED]
    verdicts = [client.get_model_version(r["model"], r["version"]).tags[D.VERDICT_TAG] for r in rows]
    assert verdicts == [D.PROMOTED, D.REFUSED_NOT_SHOWN, D.REFUSED_WORSE]
    assert [r["aliases"] for r in rows] == [D.CHAMPION, "none", D.CANDIDATE]
    assert "candidate only" not in md and "from the registry (sqlite:" in md
    # the findings say the same in words: each arm's sentence opens with its registered verdict
    findings = md.split("## Findings")[1].split("\n## ")[0]
    assert "tg/cda (v1): promoted; tg/context-cda (v2): refused: not shown" in findings
    assert "tg/context-cda-nofilter (v3): refused: worse" in findings
    assert "- **CDA** against Vanilla — promoted: less biased on StereoSet" in findings
    assert ("- **Context-CDA (no filter)** against Vanilla — refused: worse (evidence against it: SS, CS vs vanilla; "
            "SS, CS vs champion v1)") in findings
    # and Table 1's marks are the gate's outcomes against vanilla, as promotion.json recorded them
    table = md.split("## Table 1")[1].split("\n## ")[0]
    for arm, label in (("cda", "CDA"), ("context-cda-nofilter", "Context-CDA (no filter)")):
        rec = json.loads((run / "register" / "tg" / arm / "promotion.json").read_text())["comparisons"]["vs_vanilla"]
        cells = next(ln for ln in table.splitlines() if ln.startswith(f"| {label} |")).split("|")[3:7]
        for cell, metric in zip(cells, ("stereoset_ss", "stereoset_lms", "stereoset_icat", "crows_cs"), strict=True):
            if metric == "stereoset_icat":  # not a gate metric: marked by its paired difference
                continue
            want = {"better": "▲", "worse": "▼"}.get(rec.get(metric, {}).get("outcome"), "")
            assert cell.strip().endswith(want) if want else not {"▲", "▼"} & set(cell), (arm, metric, cell)
    # MLflow holds the whole report: the Markdown, the HTML, every image it shows (the SE histogram too), the tables
    arts = {Path(a.path).name for a in client.list_artifacts(summary["mlflow_run_id"], "report")}
    shown = set(re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", md))
    assert "tg-se-hist.png" in shown and shown <= arts, shown - arts
    assert {"report.md", "report.html", "table1.csv", "comparisons.csv"} <= arts
