# The two commands a user needs (see README.md); each sets up .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# torch is pinned for this environment to the CPU build; the package itself accepts a range.
TORCH ?= torch==2.13.0
PROFILE ?=

.PHONY: report test check properties unit clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[triton]"
	touch $(STAMP)

report: $(STAMP)  ## the claim-status report, on CPU: writes report/
	$(BIN)/claims report $(if $(PROFILE),--profile $(PROFILE))

test: $(STAMP)  ## registry check, the property suite, then the suite's own tests
	$(BIN)/claims check
	$(BIN)/python -m pytest -n auto properties/
	$(BIN)/python -m pytest -n auto tests/

check: $(STAMP)
	$(BIN)/claims check

clean:
	rm -rf $(VENV) results report .hypothesis
