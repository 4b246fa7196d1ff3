# tunehub: `make run` installs and serves on the embedded default; `make test` installs, checks
# (ruff lint, ruff format, mypy) and tests. `make format` rewrites what `make test` would refuse.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test lint typecheck format bench clean

# Reinstalls whenever pyproject.toml changes (dependencies, pinned tools, their config).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,onnx]'
	touch $(STAMP)

install: $(STAMP)

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

test: install lint typecheck
	$(PY) -m pytest

bench: install
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) bench/kernel_quality.py

clean:
	rm -rf $(VENV) tunehub-data .pytest_cache .ruff_cache .mypy_cache
