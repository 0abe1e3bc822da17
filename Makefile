# `make demo` and `make test` set everything up on a fresh machine (a virtual environment in .venv).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck bench experiments clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/kubeflux demo

test: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest -n 2 -q

experiments: $(STAMP)
	$(BIN)/python -m kubeflux.sim.experiments

bench: $(STAMP)
	$(BIN)/python benchmarks/match.py

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache src/*.egg-info
