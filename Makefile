# One command sets everything up and runs the demo; one runs every check.
#   make test   - venv from nothing, then ruff, mypy and the whole pytest suite
#   make bench  - the benchmarks in bench/ (on demand, never part of the tests)

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: test lint typecheck pytest bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 12), f"Python >= 3.12 needed, found {sys.version.split()[0]} (pyenv reads .python-version)"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy django_emq tests bench

pytest: $(STAMP)
	$(BIN)/pytest

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python bench/lanes.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
