# One task runner for people and CI. `make run` and `make test` work on a fresh machine that has
# only Python 3.11+ and pip: they create .venv and install the project with a CPU-only torch.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
SAMPLE := data/sample

# Models and tokenizers come from installed packages: never reach a model hub.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install run ingest-sample test test-fast lint format clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# constraints.txt pins torch to the CPU build; unpinned, pip would fetch a multi-GB CUDA one
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,llamacpp]'
	touch $(STAMP)

ingest-sample: install
	$(BIN)/abstract-qa ingest $(SAMPLE) --if-empty

run: ingest-sample
	$(BIN)/abstract-qa stats

test: install
	$(BIN)/python -m pytest

test-fast: install
	$(BIN)/python -m pytest -m "not slow"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
