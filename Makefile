# arlkit's two promises: `make demo` (the main job on the embedded default) and `make test` (the whole suite).
# Both create the virtualenv and install everything they need on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
# CPU machines: pin the CPU wheel. GPU users: `make install TORCH_PIN=torch` (or their CUDA build).
TORCH_PIN ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.arlkit-installed
VERL_STAMP := $(VENV)/.arlkit-verl-installed
# verl for the tests of arlkit's verl plugin, agent loop and trainer modes (docs/scale-out.md): --no-deps, their
# full requirements pull GPU stacks; the `verl` extra adds what they import on a CPU.
VERL_PIN ?= verl==0.9.1 tensordict==0.10.0 TransferQueue==0.1.11
# bfcl-eval the light way (docs/benchmarks.md): its multi-turn classes and checker need only mpmath; its
# function-calling helpers (native tool calls) tree-sitter's parsers and tenacity, at bfcl-eval's pins.
BFCL_PIN ?= bfcl-eval==2026.3.23 tree-sitter==0.21.3 tree-sitter-java==0.21.0 tree-sitter-javascript==0.21.4 tenacity
# ALFWorld (`--env alfworld`, the `alfworld` extra) needs two packages that come only as sdists: its planner
# fast-downward-textworld (cmake + g++, 1.5-3 minutes) and jericho. Their wheels are built once into
# $(WHEELS) and installed from there afterwards.
WHEELS ?= .cache/wheels
ALFWORLD_SDISTS ?= fast-downward-textworld==20.6.4 jericho==3.3.1
# GEM (the `gem` extra) pins reasoning-gym older than the `math` extra's: --no-deps, with the one dependency
# its games import that nothing else brings.
GEM_PIN ?= gem-llm==0.1.0 nltk==3.9.1

.PHONY: install install-extras demo test test-stress bench clean

$(STAMP): pyproject.toml Makefile
	./scripts/install-system-deps.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip "setuptools>=77"  # the wheel test builds arlkit offline with it
	$(BIN)/python -m pip install --quiet "$(TORCH_PIN)" -e ".[test,terminal,lora,humaneval,export,wandb,math,serve,webshop]" mpmath
	$(BIN)/python -m pip install --quiet --no-deps $(BFCL_PIN)
	touch $(STAMP)

install: $(STAMP)

# The heavy extras the tests also need (`make install-extras`; `make test` does it): verl, ALFWorld and the
# environment hubs (verifiers, OpenEnv, skyrl-gym, GEM).
$(VERL_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --no-deps $(VERL_PIN)
	ls $(WHEELS)/fast_downward_textworld-20.6.4-*.whl $(WHEELS)/jericho-3.3.1-*.whl >/dev/null 2>&1 \
		|| $(BIN)/python -m pip wheel --quiet --no-deps --wheel-dir $(WHEELS) $(ALFWORLD_SDISTS)
	$(BIN)/python -m pip install --quiet --find-links $(WHEELS) "$(TORCH_PIN)" \
		-e ".[test,terminal,lora,humaneval,export,wandb,math,serve,webshop,alfworld,verl,verifiers,openenv,skyrl]" \
		$(ALFWORLD_SDISTS)
	$(BIN)/python -m pip install --quiet --no-deps $(GEM_PIN)
	# inspect-ai (the test extra) needs openai >= 3.4 when it runs, while verifiers 0.4.0 declares openai < 3
	# (pip names the conflict and goes on); the parts of verifiers arlkit uses run on openai 3
	# (tests/integrations/test_verifiers.py).
	$(BIN)/python -m pip install --quiet "openai>=3.4"
	touch $(VERL_STAMP)

install-extras: $(VERL_STAMP)

demo: $(STAMP)
	$(BIN)/arlkit demo --out runs/demo

# The whole suite on TEST_WORKERS processes (pytest-xdist); the longest tests start first (tests/conftest.py).
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -n $(TEST_WORKERS)

test: $(STAMP) $(VERL_STAMP)
	$(PYTEST)

# The whole suite with two CPU-burning processes beside it: it must pass under load too (tests wait for
# events under one deadline derived from CI's limit). The burners are killed when the suite ends, however it ends.
test-stress: $(STAMP) $(VERL_STAMP)
	@sh -c 'while :; do :; done' & b1=$$!; sh -c 'while :; do :; done' & b2=$$!; \
	trap 'kill $$b1 $$b2 2>/dev/null' EXIT; trap 'exit 130' INT TERM; \
	echo "CPU burners running: $$b1 $$b2"; \
	$(PYTEST)

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) runs .pytest_cache
