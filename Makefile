# Two commands on a fresh machine: `make demo` and `make test`. Both build .venv on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Two workers: the suite is sized for a 2-core machine.
PYTEST_WORKERS ?= 2

.PHONY: setup test demo bench clean

$(STAMP): pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The CPU build first: an unpinned torch would pull a multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	touch $(STAMP)

setup: $(STAMP)

test: $(STAMP)
	@$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -q; status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests; that is a failure"; exit 1; fi; \
	exit $$status

demo: $(STAMP)
	$(BIN)/gauntlet demo

bench: $(STAMP)
	$(BIN)/gauntlet bench core

clean:
	rm -rf build dist *.egg-info runs
