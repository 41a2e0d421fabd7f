"""Where the lm-evaluation-harness venv is and how the opt-in ``lmeval`` tests run a helper script in it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the harness's python (scripts/setup-lmeval.sh creates .venv-lmeval; CCDA_LMEVAL_PYTHON names another)
LMEVAL_PY = Path(os.environ.get("CCDA_LMEVAL_PYTHON", ROOT / ".venv-lmeval" / "bin" / "python"))


def run_in_harness(script: str, *args: str, out: Path, timeout: int = 3600) -> dict:
    """Run ``tests/helpers/<script>`` with the harness's python, offline; return the JSON it wrote to ``out``."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    r = subprocess.run([str(LMEVAL_PY), str(ROOT / "tests" / "helpers" / script), *map(str, args), str(out)],
                       capture_output=True, text=True, env=env, timeout=timeout)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(out.read_text())
