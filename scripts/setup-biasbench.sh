#!/usr/bin/env bash
# Create .venv-biasbench: McGill-NLP/bias-bench's own code (commit 291426aa) in a venv of its own, with CPU torch
# and the project's transformers, for the opt-in `-m biasbench` test that compares the baseline arms'
# `bias-bench` mode with bias-bench itself: INLP's projection matrix, SentenceDebias's bias direction, and the
# per-item StereoSet and CrowS-Pairs scores of INLP, SentenceDebias and Self-Debias models.
#
#   BIASBENCH_SRC=PATH scripts/setup-biasbench.sh     # once (a few minutes)
#   HF_HUB_OFFLINE=1 CCDA_DATA_DIR=../shared/data .venv/bin/python -m pytest -m biasbench tests/integration/test_bias_bench.py
#
# Where bias-bench's code comes from (it is never copied into this repository):
#   * BIASBENCH_SRC=DIR: a checkout of bias-bench at 291426aa (a folder holding bias_bench/ and experiments/), or a
#     git directory of its repository (bare or not), from which the pinned commit is exported;
#   * unset: a clone of https://github.com/McGill-NLP/bias-bench at the pinned commit (needs GitHub access).
#   Either way the code lands in BIASBENCH_DIR (default ~/.cache/context-cda/bias-bench-291426aa), outside the
#   repository, and the venv finds it through a .pth file. Its Python dependencies come from PyPI: torch
#   (CPU), transformers (the project venv's version, so both sides run the same model code), scikit-learn, scipy,
#   nltk, pandas; and llama-index-core without its dependencies, only for the NLTK punkt tables it ships (bias-bench
#   splits sentences with nltk, whose tables cannot be downloaded here).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${BIASBENCH_VENV:-.venv-biasbench}
PIN=291426aa
URL=https://github.com/McGill-NLP/bias-bench
DEST=${BIASBENCH_DIR:-$HOME/.cache/context-cda/bias-bench-$PIN}

# the code and the word list only: a snapshot may lack the repository's large data files, which the test does not use
PATHS=(bias_bench experiments setup.py data/bias_attribute_words.json)

export_pin() {  # export_pin GIT_DIR: the pinned commit's PATHS into DEST (a private index: the source stays as it is)
  local index
  index=$(mktemp)
  rm -f "$index"
  GIT_INDEX_FILE="$index" git --git-dir="$1" --work-tree="$DEST" checkout "$PIN" -- "${PATHS[@]}"
  rm -f "$index"
}

if [ ! -d "$DEST/bias_bench" ]; then
  SRC=${BIASBENCH_SRC:-}
  mkdir -p "$DEST"
  if [ -z "$SRC" ]; then
    git clone --quiet --no-checkout "$URL" "$DEST.clone" && export_pin "$DEST.clone/.git"
    rm -rf "$DEST.clone"
  elif [ -d "$SRC/bias_bench" ]; then
    cp -R "$SRC/." "$DEST/"
  elif git --git-dir="$SRC" rev-parse --verify --quiet "$PIN^{commit}" >/dev/null 2>&1; then
    export_pin "$SRC"
  elif git -C "$SRC" rev-parse --verify --quiet "$PIN^{commit}" >/dev/null 2>&1; then
    export_pin "$(git -C "$SRC" rev-parse --absolute-git-dir)"
  else
    echo "error: BIASBENCH_SRC=$SRC is neither a bias-bench checkout (no bias_bench/ in it) nor a git directory holding commit $PIN" >&2
    exit 2
  fi
fi
test -f "$DEST/bias_bench/debias/inlp/context_nullspace_projection.py" || {
  echo "error: $DEST does not hold bias-bench's code (bias_bench/debias/inlp/...); delete it and rerun" >&2; exit 2; }

TRANSFORMERS_SPEC=${TRANSFORMERS_SPEC:-}
if [ -z "$TRANSFORMERS_SPEC" ] && [ -x .venv/bin/python ]; then
  TRANSFORMERS_SPEC="transformers==$(.venv/bin/python -c 'import transformers; print(transformers.__version__)')"
fi
TRANSFORMERS_SPEC=${TRANSFORMERS_SPEC:-transformers>=5,<6}

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/pip" install --quiet --upgrade pip
"$VENV/bin/pip" install --quiet "torch==2.13.0"
"$VENV/bin/pip" install --quiet "$TRANSFORMERS_SPEC" safetensors scikit-learn scipy nltk pandas tqdm
"$VENV/bin/pip" install --quiet --no-deps llama-index-core
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$DEST" > "$SITE/bias_bench_src.pth"
"$VENV/bin/python" - <<'EOF'
import importlib.util, pathlib, transformers, sklearn
import bias_bench
spec = importlib.util.find_spec("llama_index.core")
punkt = [p for p in pathlib.Path(next(iter(spec.submodule_search_locations))).rglob("punkt_tab")] if spec else []
print("bias-bench from", pathlib.Path(next(iter(bias_bench.__path__))).parent, "| transformers", transformers.__version__,
      "| scikit-learn", sklearn.__version__, "| punkt tables:", punkt[0] if punkt else "NOT FOUND")
EOF
echo "ready in $VENV"
