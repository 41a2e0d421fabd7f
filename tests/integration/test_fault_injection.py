"""`ccda run` against a generator server that fails ~60 % of its requests, then against a healthy one.

Errors are not results: the first run stops at augment with exit code 75; a second run with --allow-errors goes on
(loudly) but marks neither augment nor the sample step up to date; the third run, against the healed server, sends
exactly the items that failed before (counted in the fake server), and ends with every item accepted or rejected
with a reason, none twice, every step up to date.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml
from tests.helpers.fake_openai import FakeOpenAIServer
from tests.helpers.tiny_pipeline import fast_overrides

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.services


def ccda(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("CCDA_PARAMS", None)
    return subprocess.run([sys.executable, "-m", "context_cda.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, env=env, timeout=900)


def _profile(tmp_path: Path, base_url: str) -> Path:
    over = fast_overrides(base_url)
    over["augment"]["openai"].update({"max_attempts": 1, "backoff_base_s": 0.01, "timeout_s": 5.0})
    over["entropy"]["limit"] = None  # every item, so "the items the sample step has not finished" is well defined
    over["run"] = {"run_dir": str(tmp_path / "run")}
    over["tracking"] = {"enabled": False}
    base = yaml.safe_load((ROOT / "configs" / "tiny.yaml").read_text())
    for sec, values in over.items():
        base.setdefault(sec, {}).update(values)
    base["ingest"]["path"] = str(ROOT / base["ingest"]["path"])
    path = tmp_path / "tiny-faulty.yaml"
    path.write_text(yaml.safe_dump(base))
    return path


def _calls(srv: FakeOpenAIServer, since: int, kind: str) -> list[str]:
    return [c["sentence"] for c in srv.calls[since:] if c["kind"] == kind]


def test_transient_failures_are_retried_exactly_once_the_server_is_healthy(tmp_path):
    run = tmp_path / "run"
    aug_dir, smp_dir = run / "augment", run / "sample"  # the merged outputs
    ent_dir = run / "entropy" / "tiny-gpt2"
    aug_part, smp_part = run / "augment-parts" / "part-0", run / "sample-parts" / "part-0"
    with FakeOpenAIServer(model="fake-model", fault_rate=0.6, faults=("500", "429", "drop", "badjson")) as srv:
        profile = str(_profile(tmp_path, srv.base_url))

        # 1. faulty server: augment ends with error items -> exit 75, nothing trained, augment not up to date
        r1 = ccda("run", "--profile", profile)
        assert r1.returncode == 75, r1.stderr[-3000:]
        err_line = [ln for ln in r1.stderr.splitlines() if ln.startswith("error: ")]
        assert len(err_line) == 1 and "augment-part[part-0]: " in err_line[0] and "failed for a transient reason" in err_line[0]
        assert "Traceback" not in r1.stderr and not (run / "finetune").exists() and not smp_part.exists()
        errors1 = pd.read_parquet(aug_part / "errors.parquet")  # the part stopped; no merge ran
        assert len(errors1) > 0 and not (aug_part / ".ccda-step.json").exists()
        assert not set(errors1["cda_id"]) & set(pd.read_parquet(aug_part / "rejected.parquet")["cda_id"])

        # 2. still faulty, --allow-errors: augment retries exactly its error items, the sample step gets errors
        #    of its own; the run goes on loudly, and neither step is marked up to date
        n = len(srv.calls)
        r2 = ccda("run", "--profile", profile, "--allow-errors", "--until", "filter")
        assert r2.returncode == 0, r2.stderr[-3000:]
        assert "WARNING" in r2.stderr and "rerun `ccda run` to retry exactly these items" in " ".join(r2.stderr.split())
        assert set(_calls(srv, n, "augment")) == set(errors1["counterfactual"])
        errors2 = pd.read_parquet(aug_dir / "errors.parquet")
        ent_errors2 = pd.read_parquet(smp_dir / "errors.parquet")
        assert len(ent_errors2) > 0
        assert len(pd.read_parquet(ent_dir / "errors.parquet")) == 0  # the target scored what was sampled
        for d in (smp_dir, ent_dir):
            rejected2 = pd.read_parquet(d / "rejected.parquet")
            assert not rejected2["reason"].str.contains("generator|HTTP|429|500").any()  # errors are not rejections
        dry = ccda("run", "--profile", profile, "--dry-run", "--until", "filter").stdout
        assert "to run  augment-part[part-0]" in dry and "to run  sample-part[part-0]" in dry
        assert "to run  augment\n" in dry and "to run  sample\n" in dry and "up to date  cda" in dry
        entropy_items2 = set(pd.read_parquet(run / "validate" / "augment" / "valid.parquet")["id"])

        # 3. healthy server: exactly the failed items are sent again, each once
        srv.fault_rate = 0.0
        n = len(srv.calls)
        r3 = ccda("run", "--profile", profile)
        assert r3.returncode == 0, r3.stderr[-3000:]
        sent_aug, sent_ent = _calls(srv, n, "augment"), _calls(srv, n, "sample")
        assert set(sent_aug) == set(errors2["counterfactual"])
        valid3 = pd.read_parquet(run / "validate" / "augment" / "valid.parquet")
        new_to_entropy = valid3.loc[~valid3["id"].isin(entropy_items2), "augmented"].str.strip()
        assert sorted(sent_ent) == sorted({*ent_errors2["text"].str.strip(), *new_to_entropy})
        assert max(Counter(sent_ent).values()) == 1  # one request (n samples) per item: nothing doubled
        print(f"\nfault injection: run 1 augment errors {len(errors1)}; run 2 augment errors {len(errors2)}, sample "
              f"errors {len(ent_errors2)}; run 3 sent {len(sent_aug)} augment requests for {len(set(sent_aug))} "
              f"items and {len(sent_ent)} sampling requests ({len(ent_errors2)} retried, {len(new_to_entropy)} new)")

    # every item accepted or rejected with a reason, none twice, no error left; every step up to date
    cda_ids = set(pd.read_parquet(run / "validate" / "cda" / "valid.parquet")["id"])
    aug = pd.read_parquet(aug_dir / "augmented.parquet")
    rej = pd.read_parquet(aug_dir / "rejected.parquet")
    assert aug["cda_id"].is_unique and rej["cda_id"].is_unique and not set(aug["cda_id"]) & set(rej["cda_id"])
    assert set(aug["cda_id"]) | set(rej["cda_id"]) == cda_ids and (rej["reason"].str.len() > 0).all()
    assert len(pd.read_parquet(aug_dir / "errors.parquet")) == 0
    scores = pd.read_parquet(ent_dir / "scores.parquet")
    ent_rej = pd.read_parquet(ent_dir / "rejected.parquet")
    assert scores["id"].is_unique and not set(scores["id"]) & set(ent_rej["id"])
    assert set(scores["id"]) | set(ent_rej["id"]) == set(valid3["id"])
    assert len(pd.read_parquet(smp_dir / "errors.parquet")) == 0
    assert (run / "finetune" / "tiny-gpt2" / "context-cda" / "seed-13" / "final" / "model.safetensors").is_file()
    dry = ccda("run", "--profile", profile, "--dry-run").stdout
    assert "to run" not in dry, dry
