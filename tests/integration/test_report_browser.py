"""The HTML report in a real browser (headless Chromium): every image loads, the page does not overflow the
window, the sections are there, and a screenshot of the whole page is a page, not a blank."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from tests.helpers import browser
from tests.helpers.predictions import write_predictions

pytest.importorskip("matplotlib")
CHROME = browser.find()
pytestmark = pytest.mark.skipif(CHROME is None, reason=f"no Chromium here: {browser.INSTALL_HINT}")

VANILLA = {"stereoset_ss": 62.0, "stereoset_lms": 88.0, "stereoset_icat": 66.9, "crows_cs": 58.0}


def _ci(m: dict, half: float = 4.0) -> dict:
    return {**m, **{f"{k}_ci_{s}": v + (half if s == "high" else -half) for k, v in m.items() for s in ("low", "high")}}


def crafted_run(run: Path) -> Path:
    """Two arms over three epochs with intervals, and per-item evidence of vanilla and both arms."""
    from context_cda.layout import RunLayout

    lay = RunLayout(run).check()
    for arm, ss in (("cda", (60.0, 58.5, 57.0)), ("context-cda", (57.0, 54.0, 52.5))):
        d = lay.step_dir("finetune", target="gpt2", arm=arm, seed=13)
        d.mkdir(parents=True)
        rows = [{"epoch": 0, "arm": arm, "target": "gpt2", **_ci(VANILLA)}]
        rows += [{"epoch": e + 1, "arm": arm, "target": "gpt2", **_ci({**VANILLA, "stereoset_ss": v})}
                 for e, v in enumerate(ss)]
        pd.DataFrame(rows).to_csv(d / "metrics.csv", index=False)
        write_predictions(lay.evaluation_dir("gpt2", arm, 13), ss[-1] / 100, 0.55)
    write_predictions(lay.evaluation_dir("gpt2"), 0.62, 0.58)
    return run


def _report(tmp_path: Path) -> Path:
    from context_cda.config import Config
    from context_cda.report import run_report
    from context_cda.stages import step_inputs

    run = crafted_run(tmp_path / "run")
    cfg = Config.model_validate({"run": {"run_dir": str(run), "targets": {"gpt2": "tiny:gpt2"}},
                                 "train": {"epochs": 3}, "tracking": {"enabled": False}})
    run_report(cfg, step_inputs(cfg, "report"), run / "report")
    return run / "report" / "report.html"


def test_the_html_report_renders_in_chromium(tmp_path):
    page = _report(tmp_path)
    info = browser.inspect(page, CHROME)
    assert info["images"] and all(i["ok"] for i in info["images"]), info["images"]  # no broken image
    assert {i["src"] for i in info["images"]} == {f"gpt2-{m}.png" for m in ("ss", "lms", "icat", "cs")}
    assert info["width"] <= info["window"], "the page is wider than the window (a table or image overflows)"
    for section in ("Setup", "Findings", "Table 1: intrinsic bias after debiasing", "Paired comparisons", "Figures"):
        assert section in info["headings"]
    assert info["tables"] >= 3 and 1500 < info["height"] < 40000


def test_a_screenshot_of_the_whole_page_shows_text_tables_and_curves(tmp_path):
    from PIL import Image

    page = _report(tmp_path)
    png = browser.screenshot(page, tmp_path / "report.png", CHROME)
    im = Image.open(png).convert("RGB")
    assert im.width == 1280 and im.height > 1500
    small = im.resize((im.width // 4, im.height // 4))
    px = list(small.getdata())
    ink = sum(1 for r, g, b in px if r + g + b < 600) / len(px)  # text, rules, table lines, curves
    assert 0.01 < ink < 0.6, ink
    blue = sum(1 for r, g, b in px if b > 140 and r < 90 and g < 130)  # the first arm's line and band (#1f5fa8)
    assert blue > 20, "no curve drawn in the screenshot"
