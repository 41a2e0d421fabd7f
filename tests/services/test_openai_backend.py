"""The openai backend against a real HTTP server on 127.0.0.1 that injects faults (tests/helpers/fake_openai.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))

from cda_table import openai_config, write_cda_table  # noqa: E402
from fake_openai import FakeOpenAIServer, free_port  # noqa: E402

from context_cda.augment import build_messages, run_augment
from context_cda.config import OpenAIServerConfig  # noqa: E402
from context_cda.errors import ServiceError  # noqa: E402
from context_cda.generation import SamplingParams, make_generator  # noqa: E402

pytestmark = pytest.mark.services


def _server_cfg(url: str, **kw) -> OpenAIServerConfig:
    base = {"base_url": url, "timeout_s": 0.3, "max_attempts": 3, "backoff_base_s": 0.01, "backoff_max_s": 0.05,
            "concurrency": 3}
    base.update(kw)
    return OpenAIServerConfig(**base)


@pytest.fixture
def server():
    with FakeOpenAIServer(slow_s=0.8) as srv:
        yield srv


def test_each_fault_is_retried_and_n_completions_arrive(server):
    gen = make_generator("openai", "fake-model", openai=_server_cfg(server.base_url))
    sents = ["He went home [F500].", "He waited [F429].", "He slept [SLOW].", "He ran [BADJSON].",
             "He sat [DROP].", "He stayed."]
    res = gen.generate([build_messages(s, few_shot=False) for s in sents], SamplingParams(n=2, seed=3))
    for s, r in zip(sents, res, strict=True):
        assert r.ok, (s, r.error)
        assert len(r.texts) == 2 and r.texts[0].endswith(s) and r.completion_tokens > 0
    faults = [f for (_, _, _, f) in server.log if f]
    assert sorted(faults) == ["429", "500", "badjson", "drop", "slow"]
    assert gen.stats["retries"] == 5 and server.httpd.max_inflight <= 3


def test_exhausted_retries_give_an_error_result_not_an_exception(server):
    gen = make_generator("openai", "fake-model", openai=_server_cfg(server.base_url))
    res = gen.generate([build_messages(s, few_shot=False) for s in ["He died [DEAD].", "He lived."]],
                       SamplingParams())
    assert res[0].error == "HTTP 500 (after 3 attempts)" and res[0].texts == []
    assert res[1].ok
    assert sum(1 for s, *_ in server.log if "[DEAD]" in s) == 3


def test_wrong_model_name_is_a_clear_error(server):
    with pytest.raises(ServiceError, match="does not serve model 'llama'.*fake-model"):
        make_generator("openai", "llama", openai=_server_cfg(server.base_url))


def test_server_down_is_a_clear_error():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ServiceError, match="Cannot reach the OpenAI-compatible server"):
        make_generator("openai", "fake-model", openai=_server_cfg(url, max_attempts=2))


def test_server_gone_mid_run_stops_the_run_and_resume_finishes(tmp_path):
    src = write_cda_table(tmp_path / "cda.parquet", 12)
    srv = FakeOpenAIServer().start()
    port = srv.port
    cfg = openai_config(srv.base_url, tmp_path, shard_size=4, openai={"max_attempts": 2})
    gen = make_generator("openai", "fake-model", openai=cfg.augment.openai)
    orig = gen.generate
    calls = {"n": 0}

    def generate_then_kill(prompts, params):
        calls["n"] += 1
        if calls["n"] == 2:
            srv.stop()
        return orig(prompts, params)

    gen.generate = generate_then_kill
    with pytest.raises(ServiceError, match="stopped answering"):
        run_augment(cfg, {"counterfactuals": src}, tmp_path / "out", generator=gen)
    # the server comes back on the same port; the rerun sends only the unfinished items
    srv2 = FakeOpenAIServer(port=port).start()
    try:
        s = run_augment(cfg, {"counterfactuals": src}, tmp_path / "out")
    finally:
        srv2.stop()
    assert s["resumed_items"] == 4 and s["processed_items"] == 8 and s["accepted"] == 12
    assert len(srv2.log) == 8


@pytest.mark.parametrize("fault_rate", [0.35])
def test_random_faults_no_item_lost_or_duplicated(tmp_path, fault_rate):
    n = 40
    src = write_cda_table(tmp_path / "cda.parquet", n, {5: "[DEAD]", 6: "[REFUSE]", 7: "[FLAKY]"})
    with FakeOpenAIServer(fault_rate=fault_rate, slow_s=0.8) as srv:
        cfg = openai_config(srv.base_url, tmp_path, shard_size=8,
                            openai={"timeout_s": 0.3, "max_attempts": 3, "concurrency": 8})
        s = run_augment(cfg, {"counterfactuals": src}, tmp_path / "out")
    aug = pd.read_parquet(tmp_path / "out" / "augmented.parquet")
    rej = pd.read_parquet(tmp_path / "out" / "rejected.parquet")
    ids = {f"cda{i:04d}" for i in range(n)}
    assert aug["cda_id"].is_unique and rej["cda_id"].is_unique
    assert set(aug["cda_id"]) | set(rej["cda_id"]) == ids and not set(aug["cda_id"]) & set(rej["cda_id"])
    assert rej["reason"].str.len().gt(0).all()
    assert {"cda0005", "cda0006"} <= set(rej["cda_id"]) and "cda0007" in set(aug["cda_id"])
    assert s["accepted"] + s["rejected"] == n and s["duplicates_dropped"] == 0
    assert any(f for (*_, f) in srv.log)  # faults really happened
