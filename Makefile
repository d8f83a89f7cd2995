# The two commands a newcomer needs: `make run` (web, worker, beat and push gateway on the embedded defaults) and
# `make test` (lint, types and the whole suite). Both create .venv and install pinned packages first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install run soak test test-clusters lint docs docs-build format bench bench-quick clean messages

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

# The translation catalogs: locale/<language>/LC_MESSAGES/django.po, compiled into the .mo files Django reads
# (build output, not committed) in pure Python, so no GNU gettext is needed (scripts/compile_messages.py).
PO_FILES := $(wildcard locale/*/LC_MESSAGES/django.po)
MESSAGES_STAMP := $(VENV)/.messages-stamp

$(MESSAGES_STAMP): $(PO_FILES) $(STAMP)
	$(BIN)/python scripts/compile_messages.py
	touch $(MESSAGES_STAMP)

install: $(STAMP) $(MESSAGES_STAMP)

# Refresh the catalogs from the source after adding or changing a text, for every language of locale/ (needs
# GNU gettext's xgettext, e.g. `apt-get install gettext`): new msgids arrive with an empty msgstr for a
# translator to fill, and the suite fails until every language has them (docs/development.md, "Languages").
messages: install
	$(BIN)/python scripts/compile_messages.py --refresh

# ADDR=host:port serves elsewhere when 8000 is taken (e.g. `ADDR=127.0.0.1:8010 make run`); the links
# dev_admin and demo_trainings print follow it.
ADDR ?= 127.0.0.1:8000
export ADDR

run: install
	$(BIN)/python manage.py migrate --noinput
	DJANGO_DEBUG=$${DJANGO_DEBUG:-1} $(BIN)/python manage.py dev_admin
	DJANGO_DEBUG=$${DJANGO_DEBUG:-1} BIN=$(BIN) bash scripts/run-all.sh

# `make run`'s stack with the demo for 30 minutes (beside `stress-ng --cpu 2` where installed): exits and
# reminders on time (docs/development.md, "The development stack"). SOAK_ARGS='--minutes 10 --no-stress'.
soak: install
	$(BIN)/python -m bench.soak $(SOAK_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .

# The suite runs on PYTEST_WORKERS processes (pytest-xdist), each with its own test database and RabbitMQ
# vhost (or SQLite database and broker folder): `make test PYTEST_WORKERS=0` runs it in one process.
# Four on two cores: much of the suite waits on PostgreSQL, RabbitMQ and the processes it starts, and the
# extra test processes fill those waits. Work stealing: a test process that runs out of tests takes half of
# another's queue, so the minute-long scenarios queued behind each other on one process at the end no longer
# leave the others idle (docs/development.md, "Where the time goes").
# PYTHONDONTWRITEBYTECODE is cleared for the run (this machine's image sets it): with it, pytest rewrites
# the asserts of every test module again in every test process of every run instead of reading its cache
# in tests/**/__pycache__ (collecting: 11.7 s of CPU a process, 8.4 s with the cache).
PYTEST_WORKERS ?= 4

test: lint docs-build
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal -m "not clusters" $(PYTEST_ARGS)

# The cluster tier (.ci/run runs it after `make test`): scenarios on PostgreSQL primaries and standbys,
# RabbitMQ nodes and network namespaces ("hosts") the tests start themselves on loopback ports and private
# addresses (docs/operations/cluster.md). Needs root (initdb as the postgres user, `ip netns`). Two test
# processes: each scenario already runs several workers, a gateway and its own servers.
test-clusters: install
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n 2 --dist worksteal -m clusters $(PYTEST_ARGS)

# The documentation site (docs/, mkdocs.yml): built with --strict, so a broken link or anchor fails `make test`.
docs-build: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

DOCS_ADDR ?= 127.0.0.1:8001
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr $(DOCS_ADDR)

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

BENCH_STAMP := $(VENV)/.bench-stamp

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[dev,bench]"
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

bench-quick: $(BENCH_STAMP)
	$(BIN)/python -m bench --quick $(BENCH_ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
