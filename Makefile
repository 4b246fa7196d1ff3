# tunehub: `make run` installs and serves on the embedded default; `make test` installs and tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(VENV)/bin/tunehub serve

lint: install
	$(VENV)/bin/ruff check .

test: install lint
	$(PY) -m pytest

bench: install
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) bench/kernel_quality.py

clean:
	rm -rf $(VENV) tunehub-data .pytest_cache
