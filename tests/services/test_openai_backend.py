"""The openai backend against a real HTTP server on 127.0.0.1 that injects faults (tests/helpers/fake_openai.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))

from cda_table import openai_config, write_cda_table  # noqa: E402
from envelope import enveloped  # noqa: E402
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


def test_a_prompt_over_the_context_length_is_a_permanent_error(server):
    gen = make_generator("openai", "fake-model", openai=_server_cfg(server.base_url))
    res = gen.generate([build_messages(s, few_shot=False) for s in ["He talked [LONG].", "He lived."]],
                       SamplingParams())
    assert res[0].permanent and res[0].error.startswith("prompt-too-long: HTTP 400: ") and res[1].ok
    assert not res[1].permanent and sum(1 for s, *_ in server.log if "[LONG]" in s) == 1  # not retried


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
    """Items whose retries ran out are errors (errors.parquet, exit 75), never rejections; the rerun against the
    healed server sends exactly those, and every id ends accepted, rejected with a reason, or (still) an error."""
    from context_cda.errors import ItemErrors

    n = 40
    src = write_cda_table(tmp_path / "cda.parquet", n, {5: "[DEAD]", 6: "[REFUSE]", 7: "[FLAKY]"})
    out = tmp_path / "out"
    ids = {f"cda{i:04d}" for i in range(n)}

    def tables():
        return [pd.read_parquet(out / f) for f in ("augmented.parquet", "rejected.parquet", "errors.parquet")]

    with FakeOpenAIServer(fault_rate=fault_rate, slow_s=0.8) as srv:
        cfg = openai_config(srv.base_url, tmp_path, shard_size=8,
                            openai={"timeout_s": 0.3, "max_attempts": 3, "concurrency": 8})
        with pytest.raises(ItemErrors) as first:  # [DEAD] answers HTTP 500 to every attempt (the step's policy)
            enveloped(cfg, "augment", run_augment, {"counterfactuals": src}, out)
        aug, rej, err = tables()
        assert first.value.count == len(err) >= 1 and "cda0005" in set(err["cda_id"])
        for t in (aug, rej, err):
            assert t["cda_id"].is_unique
        assert set(aug["cda_id"]) | set(rej["cda_id"]) | set(err["cda_id"]) == ids
        assert not (set(aug["cda_id"]) & set(rej["cda_id"]) or set(err["cda_id"]) & (set(aug["cda_id"]) | set(rej["cda_id"])))
        assert any(f for (*_, f) in srv.log)  # faults really happened

        srv.fault_rate = 0  # healed: the rerun asks only for the items that failed
        failed, before = set(err["cda_id"]), len(srv.log)
        with pytest.raises(ItemErrors) as second:
            enveloped(cfg, "augment", run_augment, {"counterfactuals": src}, out)
        retried = {sent for sent, *_ in srv.log[before:]}
    aug2, rej2, err2 = tables()
    assert second.value.count == 1 and set(err2["cda_id"]) == {"cda0005"}  # only the dead one is left
    sentences = dict(zip(pd.read_parquet(src)["id"], pd.read_parquet(src)["counterfactual"], strict=True))
    assert retried == {sentences[i] for i in failed}
    assert aug2["cda_id"].is_unique and rej2["cda_id"].is_unique
    assert set(aug2["cda_id"]) | set(rej2["cda_id"]) | set(err2["cda_id"]) == ids
    assert set(aug["cda_id"]) <= set(aug2["cda_id"])  # nothing accepted is lost
    assert rej2["reason"].str.len().gt(0).all()
    assert "cda0006" in set(rej2["cda_id"]) and "cda0007" in set(aug2["cda_id"])


# ---- the API key only over https (or to this machine) ----------------------------------------------------------


@pytest.mark.parametrize("url", ["http://ccda-vllm:8000/v1", "http://10.0.0.7:8000/v1", "http://[2001:db8::1]/v1",
                                 "http://localhost.example.com/v1"])
def test_api_key_is_never_sent_over_plain_http_to_another_host(url, monkeypatch):
    from context_cda.errors import ConfigError

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    # refused before any request (these hosts are not even looked up), naming both fixes
    with pytest.raises(ConfigError, match=r"OPENAI_API_KEY.*plain http.*https://.*allow_insecure=true"):
        make_generator("openai", "fake-model", openai=_server_cfg(url, max_attempts=1))


def test_api_key_over_https_or_with_allow_insecure_is_sent(monkeypatch):
    from context_cda.generation.openai import OpenAIGenerator

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for cfg in (_server_cfg("https://llm.example.com/v1"), _server_cfg("http://ccda-vllm:8000/v1", allow_insecure=True)):
        gen = OpenAIGenerator("fake-model", cfg, check=False)
        assert gen.headers["Authorization"] == "Bearer sk-test"


def test_plain_http_without_a_key_is_allowed(monkeypatch):
    from context_cda.generation.openai import OpenAIGenerator

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    gen = OpenAIGenerator("fake-model", _server_cfg("http://ccda-vllm:8000/v1"), check=False)
    assert "Authorization" not in gen.headers  # nothing secret travels


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_api_key_to_a_loopback_server_over_http_is_allowed(server, host, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    url = server.base_url.replace("127.0.0.1", host)
    gen = make_generator("openai", "fake-model", openai=_server_cfg(url))  # the key never leaves the machine
    assert gen.headers["Authorization"] == "Bearer sk-test"
    assert gen.generate([build_messages("He stayed.", few_shot=False)], SamplingParams())[0].ok


def test_base_url_must_be_an_http_url():
    from pydantic import ValidationError

    for bad in ("ccda-vllm:8000/v1", "ftp://host/v1", "http:///v1"):
        with pytest.raises(ValidationError, match="http:// or https://"):
            OpenAIServerConfig(base_url=bad)


def test_sigterm_while_requests_are_in_flight_stops_cleanly(capfd):
    """SIGTERM under the CLI's handler at random moments while batches of short requests connect, send and read
    (so that the signal often lands in the client's own code or while an event loop is made or closed): each time
    the requests are cancelled inside the event loop and Terminated is raised after it, with nothing on stderr.
    Raised straight from the handler, it landed in anyio's cancel scopes inside httpx (seen: in `connect_tcp`;
    `ccda run` ended with exit 1 and a RuntimeError) or in the loop's constructor (an ignored exception's
    traceback when the half-made loop was collected)."""
    import os
    import random
    import signal
    import threading
    import time

    from context_cda.runtime.signals import Terminated, sigterm_raises

    rng = random.Random(7)
    with FakeOpenAIServer() as srv:
        gen = make_generator("openai", "fake-model", openai=_server_cfg(srv.base_url, timeout_s=5.0, concurrency=8))
        prompts = [build_messages(f"He went home {i}.", few_shot=False) for i in range(200)]
        for _ in range(40):
            timer = threading.Timer(rng.uniform(0.0, 0.15), os.kill, (os.getpid(), signal.SIGTERM))
            with sigterm_raises():
                handler = signal.getsignal(signal.SIGTERM)
                with pytest.raises(Terminated):
                    timer.start()
                    for b in range(0, len(prompts), 2):  # an event loop per batch, as the stages call it
                        gen.generate(prompts[b:b + 2], SamplingParams(n=1, max_tokens=8))
                    time.sleep(5)  # the requests were done before the signal: it is raised here
                assert signal.getsignal(signal.SIGTERM) is handler  # the CLI's handler is back after the loop's
            timer.join()
        with sigterm_raises():  # the next call is unaffected
            assert len(gen.generate(prompts[:2], SamplingParams(n=1, max_tokens=8))) == 2
    import gc

    gc.collect()  # a half-made event loop would complain when collected
    err = capfd.readouterr().err
    # (the test server prints the tracebacks of the connections the cancelled requests closed)
    assert "Exception ignored" not in err and "cancel scope" not in err, err[-3000:]
