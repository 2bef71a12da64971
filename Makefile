# `make chat` and `make test` do their own set-up: a .venv with Tiller installed editable.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CHAT_ARGS ?=

.PHONY: install test lint chat bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,local]'
	touch $@

install: $(BIN)/.installed

lint: install
	$(BIN)/ruff check server tests bench
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest

chat: install
	$(BIN)/tiller chat $(CHAT_ARGS)

bench: install
	$(BIN)/python bench/bench_server.py
	$(BIN)/python bench/bench_providers.py
	$(BIN)/python bench/bench_sessions.py
	$(BIN)/python bench/bench_leak.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
