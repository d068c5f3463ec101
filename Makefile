# `make demo` runs the dashboard with the embedded default (SQLite, no Redis, built-in demo cluster);
# `make test` runs the whole suite against the local PostgreSQL and Redis, then the SQLite checks.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
TEST_REDIS_URL ?= redis://127.0.0.1:6379/0
# pytest-xdist workers for the PostgreSQL run (much of it waits on servers, browsers and watchers); each
# worker gets its own test database, Redis database (TEST_REDIS_URL's number + n) and data directory
# (tests/conftest.py). Whole files go to one worker, so module-wide servers start once; the browser files go
# first and share one daphne and one Chromium per worker (tests/browser.py BrowserStack).
TEST_WORKERS ?= 2

.PHONY: demo test test-sqlite lint bench messages

$(VENV)/.runtime: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements.txt
	touch $@

$(VENV)/.dev: $(VENV)/.runtime requirements-dev.txt
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt
	touch $@

demo: $(VENV)/.runtime
	$(PY) manage.py demo $(DEMO_ARGS)

# Node packages the tests run (an OpenID provider, axe-core); exact versions in package-lock.json.
node_modules/.installed: package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

test: $(VENV)/.dev node_modules/.installed
	$(MAKE) lint
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)
	$(MAKE) test-sqlite

# Lint, format and import contracts (settings in pyproject.toml); the test run starts with it.
lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports  # which way imports point (docs/architecture.md, contracts in pyproject.toml)

# The embedded default: the same models and sync on SQLite, no Redis.
test-sqlite: $(VENV)/.dev
	env -u DATABASE_URL -u REDIS_URL GPUDASH_DATA_DIR=$(CURDIR)/.data/test-sqlite $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m sqlite_default $(PYTEST_ARGS)

# The zh_Hans catalog: collect marked strings (GNU gettext's xgettext), then compile locale/*.mo.
# Both files are committed, so a checkout runs translated without gettext installed.
MESSAGES_IGNORE := -i node_modules -i tests -i bench -i deploy -i docs -i .data
messages: $(VENV)/.dev
	$(PY) manage.py makemessages -l zh_Hans --no-obsolete --add-location=file $(MESSAGES_IGNORE)
	$(PY) manage.py compilemessages -l zh_Hans -i .venv -i node_modules
