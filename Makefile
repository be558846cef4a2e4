# The two commands a fresh machine needs: `make demo` and `make test`. Both do their own setup.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV := .venv
PY := $(VENV)/bin/python
PCLUSTER_VENV := .pcluster-venv
SPEC ?=
SPEC_CONTEXT := $(if $(SPEC),-c spec=$(abspath $(SPEC)),)
CDK := npx --no-install cdk
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
# Node 20 is what this machine has; jsii would print a banner on every synth otherwise.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_VERSION_CHECK := 1
export CDK_DISABLE_CLI_TELEMETRY := true
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: help setup synth demo test lint format clean pcluster-venv

help:
	@echo "make demo    synthesize the default deployment and run a training job (does all setup)"
	@echo "make test    run every test (does all setup)"
	@echo "make synth   synthesize the stacks into cdk.out (SPEC=path.yaml picks a spec)"
	@echo "make lint    ruff check and format check"

setup: $(VENV)/.installed node_modules/.installed

$(VENV)/.installed: requirements.txt constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt -c constraints.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

synth: setup
	$(CDK) synth --quiet $(SPEC_CONTEXT)

demo: setup
	$(CDK) synth --quiet $(SPEC_CONTEXT)
	$(PY) -m stacks.summary cdk.out $(if $(SPEC),--spec $(SPEC),)

# aws-parallelcluster pins CDK v1 and jsii 1.85, so it gets its own environment; the tests use it
# only to validate cluster configs with ParallelCluster's own schema (about a minute to build).
pcluster-venv: $(PCLUSTER_VENV)/.installed

$(PCLUSTER_VENV)/.installed: cluster/pcluster/requirements.txt cluster/pcluster/constraints.txt
	test -x $(PCLUSTER_VENV)/bin/python || python3 -m venv $(PCLUSTER_VENV)
	$(PCLUSTER_VENV)/bin/pip install --quiet -r cluster/pcluster/requirements.txt -c cluster/pcluster/constraints.txt
	touch $@

test: setup pcluster-venv
	$(PY) -m pytest

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

format: setup
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

clean:
	rm -rf cdk.out .pytest_cache .ruff_cache
