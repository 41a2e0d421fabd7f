#!/usr/bin/env bash
# Create .venv-lmeval: lm-evaluation-harness 0.4.13 in its own venv (with CPU torch and the project's
# transformers line), for the opt-in `-m lmeval` test that compares CrowS-Pairs `lm-eval` mode with the
# harness's own crows_pairs task on the local CSV:
#
#   scripts/setup-lmeval.sh            # once (a few minutes)
#   HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -m lmeval tests/integration/test_lm_eval_harness.py
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${LMEVAL_VENV:-.venv-lmeval}

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/pip" install --quiet --upgrade pip
"$VENV/bin/pip" install --quiet "torch==2.13.0"
"$VENV/bin/pip" install --quiet "lm-eval[hf]==0.4.13"
"$VENV/bin/python" -c "import lm_eval, transformers; print('lm-eval', lm_eval.__version__, 'transformers', transformers.__version__, 'ready in $VENV')"
