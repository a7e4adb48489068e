# One task runner for people and CI. `make run` and `make test` work on a fresh machine that has
# only Python 3.11+ and pip: they create .venv and install the project with a CPU-only torch.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
DEV_STAMP := $(VENV)/.dev-installed-stamp
SAMPLE := ingest/sample

# Models and tokenizers come from installed packages: never reach a model hub.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install install-dev browser run ingest-sample test test-fast lint format clean bench train

install: $(STAMP)

# The venv and an up-to-date pip first, alone: the steps after it may run at the same time.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# What the app needs and no more: `make run` never waits for a compiler.
$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	# constraints.txt pins torch to the CPU build; unpinned, pip would fetch a multi-GB CUDA one
	$(BIN)/python -m pip install --quiet -c constraints.txt -e .
	touch $(STAMP)

# Tests and lint add the dev tools and the llama.cpp extra. llama.cpp compiles for about 6
# minutes, into a wheel of its own while the rest installs (`make test` runs the two at once).
# It is compiled for any AVX2 machine, not for this one's CPU: a -march=native build on a host
# whose CPU reports AMX or AVX-512 that its VM does not enable dies of "illegal instruction" at
# the first token. --no-cache-dir: pip's wheel cache ignores CMAKE_ARGS, so a wheel built
# natively once would be reused. LLAVA_BUILD=OFF: no multimodal library to compile.
LLAMA_WHEELS := $(VENV)/llama-wheels
LLAMA_STAMP  := $(LLAMA_WHEELS)/.built
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
                    -DGGML_BMI2=ON -DLLAVA_BUILD=OFF

$(LLAMA_STAMP): pyproject.toml | $(BIN)/python
	rm -rf $(LLAMA_WHEELS)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip wheel --quiet --no-cache-dir --no-deps \
	  -w $(LLAMA_WHEELS) 'llama-cpp-python>=0.3'  # as pyproject's llamacpp extra
	touch $(LLAMA_STAMP)

install-dev:
	$(MAKE) -j2 $(DEV_STAMP)

$(DEV_STAMP): $(STAMP) $(LLAMA_STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt $(LLAMA_WHEELS)/llama_cpp_python-*.whl \
	  -e '.[dev,llamacpp]'
	touch $(DEV_STAMP)

# Debian's Chromium for the browser test (Playwright drives it; it never downloads a browser).
# Another apt-get holding its locks (two fresh clones testing at once, a system update) is waited
# out: dpkg's lock by its timeout, the package lists' lock (which the timeout does not cover) by
# trying again.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "Installing Debian's chromium for the browser test..."; \
	  for try in 1 2 3 4 5 6 7 8 9 10; do \
	    apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive \
	      apt-get -o DPkg::Lock::Timeout=600 install -y -qq chromium >/dev/null && break; \
	    [ $$try = 10 ] && exit 1; echo "apt is busy; trying again in 30 s"; sleep 30; \
	  done; }

ingest-sample: install
	$(BIN)/abstract-qa ingest --sample --if-empty

run: ingest-sample
	$(BIN)/abstract-qa app --port 8501

# The installs, the llama.cpp compile and Chromium at once; then the tests, on both cores, each
# file on one worker, in the order tests/conftest.py gives (the slowest files first; pyproject's
# addopts keep pytest-xdist from reordering them).
test:
	$(MAKE) -j3 $(DEV_STAMP) browser
	$(BIN)/python -m pytest -n 2 --dist loadfile

test-fast: install-dev
	$(BIN)/python -m pytest -n 2 --dist loadfile -m "not slow"

# Benchmarks (not part of make test; docs/benchmarks.md): 1k, 5k and all 21,958 papers of
# ../shared/data, each ingest timed beside sentence-transformers alone; author questions over
# the whole corpus's index; then that index grown to 5x and 10x (no embedding), also served by
# `chroma run`; 20 and 500 papers added, changed and deleted at 22k and at 220k; and 8 clients
# asking one server before and while it ingests 500 papers.
bench: install
	$(BIN)/python bench/run.py --sizes 1000,5000,all
	AQA_DATA_DIR=/tmp/aqa-bench/n21958/index $(BIN)/python bench/authors.py --questions 200
	$(BIN)/python bench/scale.py --index /tmp/aqa-bench/n21958/index --server
	$(BIN)/python bench/incremental.py --index /tmp/aqa-bench/n21958/index --sizes 20,500
	$(BIN)/python bench/incremental.py --index /tmp/aqa-scale/index --sizes 20,500
	rm -rf /tmp/aqa-load && cp -r /tmp/aqa-bench/n21958/index /tmp/aqa-load
	$(BIN)/python bench/load.py --index /tmp/aqa-load --clients 8 --seconds 60 --new 500

# The answer selector (app/providers/selector.json), retrained from data/train/ over an index of
# the shared corpus (built once here, about 21 minutes on 2 cores; later runs add only what
# changed), with batch packet-8 held out and measured. Deterministic (seed 37).
TRAIN_INDEX ?= .aqa-train-index
CORPUS      ?= ../shared/data/ml-abstracts.jsonl.gz
train: install
	AQA_DATA_DIR=$(TRAIN_INDEX) $(BIN)/abstract-qa ingest $(CORPUS)
	AQA_DATA_DIR=$(TRAIN_INDEX) $(BIN)/abstract-qa train data/train/questions.jsonl --seed 37
	AQA_DATA_DIR=$(TRAIN_INDEX) $(BIN)/abstract-qa train-columns data/train/tables.jsonl --seed 37

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

format: install-dev
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
