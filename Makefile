# Versions: two commands on a fresh machine.
#   make run   - virtualenv, install, migrate SQLite, load the demo app, serve on 127.0.0.1:8000
#                with the worker beside it (webhooks, email); Ctrl-C stops both
#   make test  - virtualenv, install, lint, type-check, and the whole suite (SQLite + PostgreSQL)
#   make test-compat - the suite on Django 6.x and a Python >= 3.12 found here (CI runs it too)

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PG_URL ?= postgres://postgres@127.0.0.1:5432/postgres
HOST ?= 127.0.0.1:8000

.PHONY: install migrate demo run test lint typecheck test-sqlite test-postgres test-compat bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	# The C++ build of diff-match-patch is the engine where it installs; pure Python otherwise.
	$(BIN)/python -m pip install -q "fast-diff-match-patch>=2.1" \
		|| echo "fast-diff-match-patch did not install: using the pure-Python engine"
	# axe-core (npm) for the browser tests' accessibility checks (tests/browser/conftest.py).
	npm install --prefix $(VENV)/node --no-save --no-audit --no-fund axe-core@4
	touch $(STAMP)

install: $(STAMP)

migrate: install
	$(BIN)/python manage.py migrate --noinput

demo: migrate
	$(BIN)/python manage.py load_demo --address $(HOST)

run: demo
	$(BIN)/python manage.py serve $(HOST)

lint: install
	$(BIN)/ruff check .

typecheck: install
	$(BIN)/mypy versions

test-sqlite: install
	$(BIN)/python -m pytest -q

test-postgres: install
	DATABASE_URL=$(PG_URL) $(BIN)/python -m pytest -q -m "not browser"

test: lint typecheck install
	$(BIN)/python manage.py makemigrations --check --dry-run
	$(MAKE) test-sqlite
	$(MAKE) test-postgres

test-compat:
	bash .ci/compat

bench: install
	$(BIN)/python tests/perf/bench_capture.py
	DATABASE_URL=$(PG_URL) $(BIN)/python tests/perf/bench_capture.py

clean:
	rm -rf $(VENV) .venv-compat db.sqlite3 db.sqlite3-wal db.sqlite3-shm staticfiles
