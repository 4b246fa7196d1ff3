# tunehub: `make run` installs and serves on the embedded default; `make test` installs, checks
# (ruff lint, ruff format, mypy, the docs build) and tests. `make format` rewrites what `make test` would refuse.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

CHROMIUM ?= /usr/bin/chromium

.PHONY: install run test lint typecheck format docs bench browser clean

# Reinstalls whenever pyproject.toml or the build hook changes (dependencies, pinned tools and
# npm assets, their config). The editable install runs hatch_build.py, which fetches the
# dashboard's npm assets into service/dashboard/static/vendor (git-ignored).
$(STAMP): pyproject.toml hatch_build.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,onnx]'
	touch $(STAMP)

install: $(STAMP)

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

# The docs site; its reference pages are generated from the code (docs/hooks/reference.py).
docs: install
	PYTHONDONTWRITEBYTECODE=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir build/site

test: install browser lint typecheck docs
	$(PY) -m pytest

bench: install
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) bench/kernel_quality.py

clean:
	rm -rf $(VENV) service/dashboard/static/vendor build tunehub-data .pytest_cache .ruff_cache .mypy_cache
