"""Crafted per-item benchmark predictions, as an evaluate step writes them (for the report and the gate)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from context_cda.layout import PREDICTIONS_FILE


def write_predictions(folder: Path, ss_share: float, cs_share: float, n: int = 120) -> Path:
    """An evaluate-step-like folder: StereoSet and CrowS predictions where the first ss_share / cs_share of the
    items take the stereotyped side (every unrelated sentence scores lowest: LMS 100)."""
    ss = [{"id": f"c{i}", "target": f"t{i % 8}", "bias_type": "gender",
           "score_stereotype": 0.6 if i < ss_share * n else 0.4,
           "score_anti_stereotype": 0.4 if i < ss_share * n else 0.6, "score_unrelated": 0.1} for i in range(n)]
    cp = [{"id": f"p{i}", "bias_type": "gender", "direction": "stereo",
           "score_more": -1.0 if i < cs_share * n else -2.0, "score_less": -2.0 if i < cs_share * n else -1.0}
          for i in range(n)]
    for name, rows in (("stereoset", ss), ("crows", cp)):
        (folder / name).mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_parquet(folder / name / PREDICTIONS_FILE)
    return folder


def write_entropy_scores(folder: Path, n: int = 10) -> Path:
    """An entropy step's scores table: n items, SE 0.0, 0.1, ..., 1-3 clusters (for the report's SE section)."""
    from context_cda import schemas as S
    from context_cda.layout import SCORES_FILE

    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({S.ID: [f"a{i}" for i in range(n)], S.TEXT: [f"Item {i} about her day." for i in range(n)],
                  S.SE: [0.1 * i for i in range(n)], S.N_CLUSTERS: [1 + i % 3 for i in range(n)]}
                 ).to_parquet(folder / SCORES_FILE)
    return folder
