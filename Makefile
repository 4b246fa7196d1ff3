# tunehub: `make run` installs and serves on the embedded default; `make test` installs, checks
# (ruff lint, ruff format, mypy) and tests. `make format` rewrites what `make test` would refuse.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

UPLOT := 1.6.32
SWAGGER_UI := 5.35.0
REDOC := 2.5.0
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

# The API's interactive docs (/docs, /redoc), served by the app itself (FastAPI's defaults load
# them from a CDN): Swagger UI's dist package, and ReDoc's standalone bundle alone (npm pack:
# not its hundred dependencies, which the bundle already holds).
$(VENDOR)/swagger-ui-bundle.js:
	mkdir -p build/npm $(VENDOR)
	cd build/npm && npm install --no-save --no-audit --no-fund --loglevel=error swagger-ui-dist@$(SWAGGER_UI)
	cp build/npm/node_modules/swagger-ui-dist/swagger-ui-bundle.js build/npm/node_modules/swagger-ui-dist/swagger-ui.css $(VENDOR)/
	cp build/npm/node_modules/swagger-ui-dist/LICENSE $(VENDOR)/swagger-ui.LICENSE

$(VENDOR)/redoc.standalone.js:
	mkdir -p build/npm/redoc $(VENDOR)
	cd build/npm/redoc && npm pack --silent redoc@$(REDOC) >/dev/null && tar -xzf redoc-$(REDOC).tgz
	# Its side menu shows a logo from cdn.redoc.ly (no option turns it off): an empty data: URL
	# instead, which fails to decode and the menu then hides (the image's own onError).
	sed 's#https://cdn.redoc.ly/redoc/logo-mini.svg#data:,#' \
		build/npm/redoc/package/bundles/redoc.standalone.js > $(VENDOR)/redoc.standalone.js
	cp build/npm/redoc/package/LICENSE $(VENDOR)/redoc.LICENSE

install: $(STAMP) $(VENDOR)/uPlot.iife.min.js $(VENDOR)/swagger-ui-bundle.js $(VENDOR)/redoc.standalone.js

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
