# Two entry points for a fresh machine: `make run` (the app) and `make test` (the suite).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint install

# The last step registers the project's entry points (pyproject.toml: the store's commands join
# `python -m melo_core` through them) and points the environment at the checkout (editable), so
# scripts and notebooks in any folder import melo_core.
$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet --no-deps -e .  # no notice about editable installs
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/streamlit run app.py

# The store tests also run on PostgreSQL: MELO_TEST_PG_URL, else a throwaway local server
# (scripts/with_postgres.sh installs Debian's postgresql when root on a fresh machine), and the
# browser test uses Debian's chromium (scripts/ensure_chromium.sh, the same way; else it skips).
# TEST_WORKERS pytest-xdist workers, each file on one (its module fixtures built once); 0: one process.
TEST_WORKERS ?= 2
test: $(STAMP)
	scripts/ensure_chromium.sh
	MELO_DATA=$${MELO_DATA:-../shared/melo} scripts/with_postgres.sh $(BIN)/python -m pytest tests -q \
		-n $(TEST_WORKERS) --dist loadfile
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
