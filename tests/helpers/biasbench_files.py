"""The benchmark files bias-bench's runners read, written from ours (tests/integration/test_bias_bench.py and
benchmarks/bench_intrinsic.py): StereoSet in its original JSON format, a CrowS-Pairs CSV of one bias type."""

from __future__ import annotations

import csv
import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def unique(examples: Sequence[Any]) -> list[Any]:
    """StereoSet examples with unique ids: the flattened dev set repeats (target, context) pairs, and bias-bench
    keys its predictions by sentence id, so a repeat gets ``<id>-2``, ``<id>-3``... (sentence ids follow)."""
    seen: dict[str, int] = {}
    out = []
    for ex in examples:
        seen[ex.id] = seen.get(ex.id, 0) + 1
        new = ex.id if seen[ex.id] == 1 else f"{ex.id}-{seen[ex.id]}"
        out.append(dataclasses.replace(ex, id=new, sentence_ids={lab: f"{new}-{lab}" for lab in ex.sentences}))
    return out


def write_stereoset(examples: Sequence[Any], dest: Path) -> Path:
    """``examples`` (ids unique) as StereoSet's original-format JSON, intrasentence only."""
    dest.write_text(json.dumps({"version": "1.0", "data": {"intersentence": [], "intrasentence": [
        {"id": ex.id, "target": ex.target, "bias_type": ex.bias_type, "context": ex.context,
         "sentences": [{"id": ex.sentence_ids[lab], "sentence": s, "gold_label": lab,
                        "labels": [{"human_id": "gold", "label": lab}]}
                       for lab, s in ex.sentences.items()]} for ex in examples]}}))
    return dest


def subset_crows(src: Path, dest: Path, n: int | None, bias_type: str = "gender") -> Path:
    """The first ``n`` (None: all) pairs of ``bias_type`` of a CrowS-Pairs CSV, in its own columns."""
    with open(src, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        rows = [r for r in reader if r["bias_type"] == bias_type]
        header = reader.fieldnames
    with open(dest, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        w.writerows(rows[:n] if n else rows)
    return dest
