# The two commands a user needs (see README.md); each sets up .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# torch is pinned for this environment to the CPU build; the package itself accepts a range.
TORCH ?= torch==2.13.0
PROFILE ?=

.PHONY: report test check browser clean mutants flakes

# One pip run, no byte-compiling at install (Python compiles the modules it imports, once): the set-up of a
# fresh clone in well under a minute.
# "Once" needs Python to keep what it compiled: with PYTHONDONTWRITEBYTECODE set in the environment every
# process (each xdist worker, each CLI call of the tests) would compile torch, inductor and sympy from source
# again, 8 s a process (python -c 'import torch, triton, sympy, scipy': 10.9 s without bytecode, 2.8 s with).
unexport PYTHONDONTWRITEBYTECODE
# ... and one process compiles what every later one imports, once, at set-up: otherwise the first property run's
# controller and workers all compile the same modules from source at the same time (~8 s of CPU each).
define WARM_IMPORTS
import matplotlib; matplotlib.use("Agg")
import pytest, xdist, hypothesis, sympy, scipy.stats, matplotlib.pyplot, yaml, jsonschema
import torch, torch._dynamo, torch._inductor.compile_fx, torch.nn.attention.flex_attention
import claimcheck.plugin, claimcheck.kernel, claimcheck.report, impl.backends, impl.triton_attention
endef
export WARM_IMPORTS
$(STAMP): pyproject.toml Makefile tools/oracles.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-compile "$(TORCH)" -e ".[triton,bench,oracle]"
	$(BIN)/python -m pip download -q --disable-pip-version-check --no-deps --require-hashes -r tools/oracles.txt \
	  -d $(VENV)/oracles
	$(BIN)/python -c "$$WARM_IMPORTS"
	touch $(STAMP)

report: $(STAMP)  ## the claim-status report, on CPU: writes report/
	$(BIN)/claims report $(if $(PROFILE),--profile $(PROFILE))

test: $(STAMP) browser  ## registry check, the property suite, the experiments, the suite's own tests: each runs, each is reported
	$(BIN)/python tools/test_parts.py

# The report page is tested in a real headless Chromium: install Debian's package (and a CJK font
# for readable screenshots) when it is missing and we may (root with apt-get); otherwise that test
# skips with its reason, or fails where CLAIMS_REQUIRE_CHROMIUM=1 (CI).
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null; } || \
	  echo "chromium not installed: the browser test will skip"

check: $(STAMP)
	$(BIN)/claims check

# Single-point mutants of impl/, each run against properties/ in the CI profile (slow: about a minute
# each; not part of `make test`); prints killed/survived and the score, writes results/mutants.json.
mutants: $(STAMP)
	$(BIN)/python tools/mutants.py $(MUTANTS_ARGS)

# The property suite under the random profile, once per seed (FLAKES_ARGS="--runs 5 properties/test_x.py"):
# a table of every test or claim that failed, with the seeds that replay it; writes results/flakes.json.
flakes: $(STAMP)
	$(BIN)/python tools/flakes.py $(FLAKES_ARGS)

clean:
	rm -rf $(VENV) results report .hypothesis
