# tunehub: `make run` installs and serves on the embedded default; `make test` installs, checks
# (ruff lint, ruff format, mypy) and tests. `make format` rewrites what `make test` would refuse.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

UPLOT := 1.6.32
VENDOR := service/dashboard/static/vendor
CHROMIUM ?= /usr/bin/chromium

.PHONY: install run test lint typecheck format bench browser clean

# Reinstalls whenever pyproject.toml changes (dependencies, pinned tools, their config).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,onnx]'
	touch $(STAMP)

# The dashboard's plotting library, built from npm at install time (nothing third-party is
# committed; the folder is git-ignored and served by the app itself: no CDN).
$(VENDOR)/uPlot.iife.min.js:
	mkdir -p build/npm $(VENDOR)
	cd build/npm && npm install --no-save --no-audit --no-fund --loglevel=error uplot@$(UPLOT)
	cp build/npm/node_modules/uplot/dist/uPlot.iife.min.js build/npm/node_modules/uplot/dist/uPlot.min.css $(VENDOR)/
	cp build/npm/node_modules/uplot/LICENSE $(VENDOR)/uPlot.LICENSE

install: $(STAMP) $(VENDOR)/uPlot.iife.min.js

# The browser the dashboard tests drive: Debian's Chromium (Playwright downloads none).
browser:
	test -x $(CHROMIUM) || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

run: install
	$(VENV)/bin/tunehub serve

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install
	$(VENV)/bin/mypy

format: install
	$(VENV)/bin/ruff check --select I --fix .
	$(VENV)/bin/ruff format .

test: install browser lint typecheck
	$(PY) -m pytest

bench: install
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) bench/kernel_quality.py

clean:
	rm -rf $(VENV) $(VENDOR) build/npm tunehub-data .pytest_cache .ruff_cache .mypy_cache
