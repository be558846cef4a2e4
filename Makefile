# The two commands a fresh machine needs: `make demo` and `make test`. Both do their own setup.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV := .venv
PY := $(VENV)/bin/python
PCLUSTER_VENV := .pcluster-venv
CHECKOV_VENV := .checkov-venv
TORCHTITAN_VENV := .torchtitan-venv
SPEC ?=
SPEC_CONTEXT := $(if $(SPEC),-c spec=$(abspath $(SPEC)),)
CDK := npx --no-install cdk
DEMO_RUN := runs/demo
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
# Node 20 is what this machine has; jsii would print a banner on every synth otherwise.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_VERSION_CHECK := 1
export CDK_DISABLE_CLI_TELEMETRY := true
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# Every environment below (venvs, test wheelhouses) is built once per machine into a cache folder keyed by its pins
# and its build command, and linked here (tests/env_cache.py; LLM_TRAINING_ENV_CACHE=off builds in the repo). Each
# recipe fills $$ENV_DIR; the marker is written after it succeeded. System python3: it runs before .venv exists.
ENV_CACHE := python3 -m tests.env_cache
# `make test`: the environments built side by side (mostly downloads), then pytest on two workers (docs/testing.md):
# two, not -n auto, which counts physical cores and may see one on a 2-vCPU machine; many tests wait more than compute.
SETUP_JOBS ?= 3
TEST_WORKERS ?= 2
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

.PHONY: help setup synth demo demo-finetune test test-setup test-stress lint format clean pcluster-venv checkov-venv nemo-venv bridge-venv torchtitan-venv awscli-venv bench rehearse \
	wheelhouse wheelhouse-test wheelhouse-node-cpu gpu-bench-wheels policy-report nemo-image nxdt-wheelhouse \
	observability-binaries nccl-tests-source upload-artifacts

help:
	@echo "make demo    synthesize the default deployment and run a training job (does all setup)"
	@echo "make demo-finetune  after make demo: score its run, LoRA fine-tune it on the demo instructions, score again"
	@echo "make test    run every test (does all setup)"
	@echo "make test-stress  the SLURM/torchrun/Prometheus tests STRESS_ROUNDS times (3) with every core busy"
	@echo "make synth   synthesize the stacks into cdk.out (SPEC=path.yaml picks a spec)"
	@echo "make lint    ruff check, format check and the mypy type check (make test runs it first)"
	@echo "make rehearse  README's deploy and tear-down against moto's AWS emulator on 127.0.0.1 -> docs/rehearsal.md (3 to 8 minutes)"
	@echo "make bench   CPU benchmarks against in-run baselines -> docs/benchmarks.{md,json} (under 10 minutes)"
	@echo "make policy-report  the access matrix, its reasons and the mutation score -> docs/access-matrix.md"
	@echo "make wheelhouse  the nodes' wheels for a cluster without internet (WHEELHOUSE_PYTHON=3.11)"
	@echo "make observability-binaries  the pinned exporter/agent binaries, sha256-checked, beside the wheelhouse"
	@echo "make nccl-tests-source  the pinned nccl-tests source, sha256-checked, for the fabric check -> build/nccl-tests"
	@echo "make nxdt-wheelhouse  the trn1 nodes' NxDT stack for the spec's Neuron SDK -> build/nxdt-wheelhouse (SPEC=)"
	@echo "make upload-artifacts  build the nodes' artifacts above and upload them to the spec's artifacts bucket (SPEC= PROFILE=)"
	@echo "make nemo-image  build the EFA NeMo image and push it to the spec's ECR repository (needs docker, AWS; SPEC= PROFILE=)"
	@echo "make gpu-bench-wheels  torchtitan and the trainer's wheels for bench/gpu_vs_torchtitan.py --wheels (GPU_BENCH_PYTHON=3.12)"

setup: $(VENV)/.installed node_modules/.installed

$(VENV)/.installed: requirements.txt constraints.txt
	$(ENV_CACHE) $@ $^ -- bash -ec 'python3 -m venv "$$ENV_DIR"; \
		"$$ENV_DIR/bin/python" -m pip install --quiet -r requirements.txt -c constraints.txt'

# npm ci installs beside a package.json: into a staging folder, then the finished node_modules moves to $$ENV_DIR.
node_modules/.installed: package.json package-lock.json
	$(ENV_CACHE) $@ $^ -- bash -ec 'rm -rf "$$ENV_DIR.staging"; mkdir -p "$$ENV_DIR.staging"; \
		cp package.json package-lock.json "$$ENV_DIR.staging/"; \
		npm ci --prefix "$$ENV_DIR.staging" --no-audit --no-fund --loglevel=error; \
		mv "$$ENV_DIR.staging/node_modules" "$$ENV_DIR"; rm -rf "$$ENV_DIR.staging"'

synth: setup
	$(CDK) synth --quiet $(SPEC_CONTEXT)

demo: setup
	$(CDK) synth --quiet $(SPEC_CONTEXT)
	$(PY) -m stacks.summary cdk.out $(if $(SPEC),--spec $(SPEC),)
	test -f build/data/demo_text_document.idx || $(PY) -m training.prepare --demo-corpus --output-prefix build/data/demo
	rm -rf $(DEMO_RUN) $(DEMO_RUN).fsdp.sbatch
	# A real two-node SLURM cluster on this host; the job is submitted as on the head node; stopped on any exit.
	# A local Prometheus (Debian's) scrapes the exporters and the trainer meanwhile and prints what it holds.
	set -eo pipefail; export SLURM_CONF=$(CURDIR)/.local-slurm/slurm.conf; \
	trap '$(PY) -m cluster.verify.local_slurm down' EXIT; \
	$(PY) -m cluster.verify.local_slurm up; \
	$(PY) -m cluster.verify.local_observability watch --dir build/demo-prometheus -- bash -c \
	  'set -eo pipefail; job=$$($(PY) -m launch.submit --backend fsdp --model training/configs/tiny.yaml --nodes 2 \
	    --data-prefix build/data/demo_text_document --run-dir $(DEMO_RUN) --local | cut -d" " -f1); \
	  $(PY) -m launch.follow --job $$job --run-dir $(DEMO_RUN)'

# After `make demo` (run first when its run is missing): README's "After pretraining" on the local cluster. Scores the
# demo run on the shipped tasks (lm-evaluation-harness), prepares the demo instructions with a loss mask, fine-tunes
# the run with LoRA (training/configs/tiny-lora.yaml) and scores the result; prints both scores tables.
demo-finetune: setup
	test -d $(DEMO_RUN)/checkpoints || $(MAKE) demo
	$(PY) -m training.prepare --sft --demo-corpus --tokenizer build/data/demo_tokenizer.json \
		--validation-fraction 0.2 --output-prefix build/data/demo-sft
	rm -rf $(DEMO_RUN)-lora
	set -eo pipefail; export SLURM_CONF=$(CURDIR)/.local-slurm/slurm.conf; \
	trap '$(PY) -m cluster.verify.local_slurm down' EXIT; \
	$(PY) -m cluster.verify.local_slurm up; \
	job=$$($(PY) -m launch.evaluate --run-dir $(DEMO_RUN) --all --local | cut -d" " -f1); \
	$(PY) -m launch.follow --job $$job --run-dir $(DEMO_RUN); \
	job=$$($(PY) -m launch.submit --backend fsdp --model training/configs/tiny-lora.yaml --nodes 2 \
	  --data-prefix build/data/demo-sft_sft_tokens --run-dir $(DEMO_RUN)-lora --local | cut -d" " -f1); \
	$(PY) -m launch.follow --job $$job --run-dir $(DEMO_RUN)-lora; \
	job=$$($(PY) -m launch.evaluate --run-dir $(DEMO_RUN)-lora --all --local | cut -d" " -f1); \
	$(PY) -m launch.follow --job $$job --run-dir $(DEMO_RUN)-lora
	cat $(DEMO_RUN)/eval/scores.md $(DEMO_RUN)-lora/eval/scores.md

# Evaluates the synthesized policies (IAM engine, every case and every mutant) for reviewers.
policy-report: synth
	$(PY) -m policies.verify.report --cdk-out cdk.out $(if $(SPEC),--spec $(SPEC),) --output docs/access-matrix.md

# aws-parallelcluster pins CDK v1 and jsii 1.85, so it gets its own environment; the tests run its schema,
# ConfigPatch and node-role builders on what the repo synthesizes (cluster/verify/pcluster/*; about a minute to build).
pcluster-venv: $(PCLUSTER_VENV)/.installed

$(PCLUSTER_VENV)/.installed: cluster/verify/pcluster/requirements.txt cluster/verify/pcluster/constraints.txt
	$(ENV_CACHE) $@ $^ -- bash -ec 'python3 -m venv "$$ENV_DIR"; \
		"$$ENV_DIR/bin/pip" install --quiet -r cluster/verify/pcluster/requirements.txt -c cluster/verify/pcluster/constraints.txt'

# The AWS CLI v1 for the runbook test's `aws` commands (tests/aws_cli/requirements.txt says why its own venv).
AWSCLI_VENV := .awscli-venv

awscli-venv: $(AWSCLI_VENV)/.installed

$(AWSCLI_VENV)/.installed: tests/aws_cli/requirements.txt
	$(ENV_CACHE) $@ $^ -- bash -ec 'python3 -m venv "$$ENV_DIR"; \
		"$$ENV_DIR/bin/pip" install --quiet --no-deps -r tests/aws_cli/requirements.txt'

# checkov (a second opinion on the templates; tests/policies/verify/test_checkov.py) pins its own dependency tree,
# which clashes with ours: its own environment, about 290 MB, built in about two minutes.
checkov-venv: $(CHECKOV_VENV)/.installed

$(CHECKOV_VENV)/.installed: policies/verify/checkov/requirements.txt policies/verify/checkov/constraints.txt
	$(ENV_CACHE) $@ $^ -- bash -ec 'python3 -m venv "$$ENV_DIR"; \
		"$$ENV_DIR/bin/pip" install --quiet -r policies/verify/checkov/requirements.txt -c policies/verify/checkov/constraints.txt'

# NeMo 2.4.0 (the nemo:25.07 container's) for the NeMo contract tests (tests/launch/test_nemo_contract.py): its pins
# clash with ours, so it gets its own environment, every package pinned and installed without resolution
# (about 3.2 GB; 8 minutes on the 2-core VM, most of it downloading).
NEMO_VENV := .nemo-venv
NEMO_LOCK := tests/launch/contracts/nemo-lock.txt

nemo-venv: $(NEMO_VENV)/.installed

$(NEMO_VENV)/.installed: $(NEMO_LOCK)
	$(ENV_CACHE) $@ $^ -- bash -ec 'python3 -m venv "$$ENV_DIR"; \
		"$$ENV_DIR/bin/pip" install --quiet --no-deps -r $(NEMO_LOCK)'

# Megatron Bridge 0.6.0 (NeMo Framework 26.08's, the default NeMo backend) for tests/launch/test_bridge_contract.py: Python
# 3.12 (pyenv; megatron-bridge needs >=3.12,<3.13), every package pinned in the lock and installed without resolution,
# PyPI's torch 2.13.0 with its CUDA libraries included. nvidia-resiliency-ext 0.6.0 has only a manylinux_2_39 wheel for
# Python 3.12: it is installed by file (tests/launch/contracts/bridge-lock.txt says why).
# Measured on the 2-core VM with an empty pip cache: see docs/jobs.md (size and build time).
BRIDGE_VENV := .bridge-venv
BRIDGE_LOCK := tests/launch/contracts/bridge-lock.txt
BRIDGE_PYTHON ?= $(HOME)/.pyenv/versions/3.12.1/bin/python3.12
NVRX_WHEEL := nvidia_resiliency_ext-0.6.0-cp312-cp312-manylinux_2_39_x86_64.whl

bridge-venv: $(BRIDGE_VENV)/.installed

$(BRIDGE_VENV)/.installed: $(BRIDGE_LOCK)
	$(ENV_CACHE) $@ $^ -- bash -ec '$(BRIDGE_PYTHON) -m venv "$$ENV_DIR"; \
		"$$ENV_DIR/bin/pip" install --quiet --no-deps -r $(BRIDGE_LOCK); \
		"$$ENV_DIR/bin/pip" download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
			--platform manylinux_2_39_x86_64 nvidia-resiliency-ext==0.6.0 -d "$$ENV_DIR/wheels"; \
		cp "$$ENV_DIR/wheels/$(NVRX_WHEEL)" "$$ENV_DIR/wheels/$(subst 2_39,2_28,$(NVRX_WHEEL))"; \
		"$$ENV_DIR/bin/pip" install --quiet --no-deps "$$ENV_DIR/wheels/$(subst 2_39,2_28,$(NVRX_WHEEL))"; \
		rm -rf "$$ENV_DIR/wheels"'

# The EFA-enabled NeMo image (containers/nemo-efa) into the compute account's ECR, on a machine with docker and
# credentials for that account (PROFILE: its AWS CLI profile); then, on the head node, `python -m cluster.containers
# import` makes the .sqsh.
nemo-image: setup
	$(PY) -m cluster.containers push $(if $(SPEC),--spec $(SPEC),)$(if $(PROFILE), --profile $(PROFILE),)

# torchtitan 0.3.0, the GPU comparison's peer, for the test that loads bench/torchtitan_config.py through torchtitan's
# own ConfigManager. Its own venv (its pins, datasets and wandb, stay out of .venv); torch is .venv's 2.13.0 CPU build,
# seen through a .pth file so no second torch is fetched. About 1.4 GB (triton 1 GB of it), 3 minutes to build.
# torchtitan 0.2.2 (the release the lent GPU machines' torch 2.11 runs) beside it in torchtitan-0.2.2/, not installed
# into it: the test of bench/torchtitan_v0_2_*.py puts that folder first on PYTHONPATH. 0.2.2 needs nothing 0.3.0's
# closure lacks. 1 MB. The .pth names .venv's real folder (its cache entry, keyed by the same pins as this one), not
# the clone's link, which a later clone's CI deletes.
torchtitan-venv: $(TORCHTITAN_VENV)/.installed

$(TORCHTITAN_VENV)/.installed: bench/torchtitan-requirements.txt requirements.txt constraints.txt | $(VENV)/.installed
	$(ENV_CACHE) $@ $^ -- bash -ec '"$$($(PY) -c "import sys; print(sys._base_executable)")" -m venv "$$ENV_DIR"; \
		$(PY) -c "import os, sysconfig; print(os.path.realpath(sysconfig.get_path(\"purelib\")))" > \
			"$$("$$ENV_DIR/bin/python" -c "import sysconfig; print(sysconfig.get_path(\"purelib\"))")/repo_venv.pth"; \
		"$$ENV_DIR/bin/pip" install --quiet --no-deps -r bench/torchtitan-requirements.txt; \
		"$$ENV_DIR/bin/pip" install --quiet --no-deps --no-compile --target "$$ENV_DIR/torchtitan-0.2.2" torchtitan==0.2.2; \
		touch "$$ENV_DIR/torchtitan-0.2.2/.installed"'

# The nodes' wheelhouse for a cluster without internet egress (spec cluster.python_wheelhouse): every wheel
# of requirements-node.txt for the nodes' Python (cluster.python_version) on x86_64 Linux, several GB with
# CUDA. `make upload-artifacts` builds and uploads it. Never run by the tests.
WHEELHOUSE_PYTHON ?= 3.11
WHEELHOUSE_PLATFORM ?= manylinux_2_28_x86_64
WHEELHOUSE_DIR ?= build/wheelhouse
OBSERVABILITY_DIR ?= $(WHEELHOUSE_DIR)/observability
NXDT_WHEELHOUSE_DIR ?= build/nxdt-wheelhouse

# lm-eval's pure-Python dependencies that PyPI serves only as source: built here into py3-none-any wheels first, so
# the wheelhouse stays wheels only (the nodes install with --no-index) and the download below finds them.
SDIST_ONLY_WHEELS := rouge_score==0.1.2 sqlitedict==2.1.0 word2number==1.1

wheelhouse: setup
	$(PY) -m pip wheel --quiet --no-deps $(SDIST_ONLY_WHEELS) -w $(WHEELHOUSE_DIR)
	$(PY) -m pip download --quiet --only-binary=:all: --implementation cp --python-version $(WHEELHOUSE_PYTHON) \
		--platform $(WHEELHOUSE_PLATFORM) --find-links $(WHEELHOUSE_DIR) -r requirements-node.txt -c constraints.txt \
		-d $(WHEELHOUSE_DIR)

# The pinned upstream binaries of the metrics stack (node exporter, Prometheus agent, DCGM exporter;
# cluster/observability/binaries.json), sha256-checked, into the wheelhouse's observability/ prefix, which
# head_node.sh installs from and stages for the compute nodes. Needs internet; never run by the tests.
observability-binaries: setup
	$(PY) -m cluster.observability.fetch_binaries --out $(OBSERVABILITY_DIR)

# The fabric check's nccl-tests (docs/fabric-checks.md) for a VPC without internet: the source of a pinned release,
# refused unless its sha256 is the pin (GitHub's archive of the tag, as Spack's nccl-tests package records it), for
# `make upload-artifacts` to put in the artifacts bucket's nccl-tests/; the head node copies it to /fsx and a GPU
# node builds it. The recipe writes nothing under the final name until the sha256 matched. Never run by the tests.
NCCL_TESTS_VERSION := 2.17.6
NCCL_TESTS_URL := https://github.com/NVIDIA/nccl-tests/archive/refs/tags/v$(NCCL_TESTS_VERSION).tar.gz
NCCL_TESTS_SHA256 := 38974e70342150ede0e3fb8fd24bfe60ccbde90fa20241716ba8bb338e6b61a0
NCCL_TESTS_SOURCE_DIR ?= build/nccl-tests
NCCL_TESTS_TARBALL = $(NCCL_TESTS_SOURCE_DIR)/nccl-tests-$(NCCL_TESTS_VERSION).tar.gz

nccl-tests-source: $(NCCL_TESTS_TARBALL)

$(NCCL_TESTS_TARBALL):
	mkdir -p $(@D)
	curl --fail --silent --show-error --location --output $@.part $(NCCL_TESTS_URL)
	echo "$(NCCL_TESTS_SHA256)  $@.part" | sha256sum --check --quiet - || { rm -f $@.part; exit 1; }
	mv $@.part $@

# Wheels for `python bench/gpu_vs_torchtitan.py --wheels build/gpu-bench-wheels` on a GPU machine without internet:
# torchtitan 0.3.0 and 0.2.2 (the script takes the newest the machine's torch runs) and the trainer's runtime packages
# (not torch: the machine's own is used), for that machine's Python (GPU_BENCH_PYTHON). About 160 MB. Never run by
# the tests.
GPU_BENCH_PYTHON ?= 3.12

gpu-bench-wheels: setup
	for release in 0.3.0 0.2.2; do \
		$(PY) -m pip download --quiet --no-deps --only-binary=:all: --implementation cp --python-version $(GPU_BENCH_PYTHON) \
			--platform $(WHEELHOUSE_PLATFORM) --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
			-r bench/gpu-bench-requirements-torchtitan-$$release.txt -d build/gpu-bench-wheels || exit 1; \
	done

# The trn1 nodes' NxDT stack (NxDT, NxD, torch-neuronx, neuronx-cc, NeMo, Lightning, hydra, megatron-core and
# the slim apex built from git) for the spec's cluster.neuron.sdk_version, from Neuron's pip index and PyPI.
# Run it on a machine of the nodes' OS, architecture and Python (it builds wheels); several GB. Upload it with
# `make upload-artifacts SPEC=... NO_BUILD=1` from there. Never run by the tests.
nxdt-wheelhouse: setup
	$(PY) -m cluster.nxdt_wheelhouse $(or $(SPEC),spec/examples/trn1-neuron.yaml) --out $(NXDT_WHEELHOUSE_DIR)

# Everything the spec's nodes install from S3, built (the three targets above, as the spec needs them) and synced to
# the folders the cluster config hands the nodes (spec.artifacts): after the artifacts stack, before the cluster
# stack (README, Deploying for real). PROFILE: the compute account's AWS CLI profile; NO_BUILD=1 uploads
# ARTIFACTS_DIR (build/) as it is. Several GB; needs internet. The rehearsal (tests/rehearsal) runs README's
# `make upload-artifacts` with NO_BUILD=1 and an ARTIFACTS_DIR of stand-ins against the emulator's bucket.
PROFILE ?=
NO_BUILD ?=
ARTIFACTS_DIR ?= build

upload-artifacts: setup
	$(PY) -m cluster.artifacts $(or $(SPEC),spec/default.yaml) --build-dir $(ARTIFACTS_DIR)$(if $(NO_BUILD), --no-build,)$(if $(PROFILE), --profile $(PROFILE),)

# The head-node bootstrap test's offline wheelhouse: requirements-submit.txt for this machine (a few MB).
wheelhouse-test: build/wheelhouse-test/.complete

build/wheelhouse-test/.complete: requirements-submit.txt constraints.txt | $(VENV)/.installed
	$(ENV_CACHE) $@ $^ -- bash -ec '$(PY) -m pip download --quiet --only-binary=:all: -r requirements-submit.txt \
		-c constraints.txt -d "$$ENV_DIR"'

# The head-node rehearsal's offline wheelhouse (tests/test_head_node_rehearsal.py): requirements-node.txt for this
# machine, torch as its CPU build (the pin's +cpu wheel the local index offers), about 400 MB.
wheelhouse-node-cpu: build/wheelhouse-node-cpu/.complete

build/wheelhouse-node-cpu/.complete: requirements-node.txt constraints.txt | $(VENV)/.installed
	$(ENV_CACHE) $@ $^ -- bash -ec '$(PY) -m pip wheel --quiet --no-deps $(SDIST_ONLY_WHEELS) -w "$$ENV_DIR"; \
		$(PY) -m pip download --quiet --only-binary=:all: --find-links "$$ENV_DIR" -r requirements-node.txt \
			-c constraints.txt -d "$$ENV_DIR"'

# `.venv` and `node_modules` first (everything imports them), then pytest on TEST_WORKERS processes, one test file per
# worker at a time (module fixtures run once; tests/scheduling.py sends the long journeys out first), while lint and
# the test-only environments build beside it in one `make -j$(SETUP_JOBS)` (tests/suite.py; its output in
# build/test-setup.log): they are mostly downloads, and a test that needs one waits for it (tests/environments.py).
# The order is what the first test files need (the AWS CLI, the node wheelhouse), then the longest builds, so that
# none is still building when the files that need it come up. `make test-setup` builds them all first instead.
TEST_BESIDE := awscli-venv wheelhouse-node-cpu bridge-venv nemo-venv pcluster-venv wheelhouse-test lint checkov-venv \
	torchtitan-venv

test:
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) --output-sync=target setup
	$(PY) -m tests.suite --jobs $(SETUP_JOBS) --log build/test-setup.log $(TEST_BESIDE) -- $(PYTEST_PARALLEL)

test-setup: setup $(TEST_BESIDE)

# The tests that wait on SLURM jobs, torchrun ranks and Prometheus scrapes, STRESS_ROUNDS times under busy loops on
# every core (tests/stress.py); every failure is printed with its job story. Before stopping; not part of CI.
STRESS_ROUNDS ?= 3

test-stress: setup pcluster-venv nemo-venv bridge-venv torchtitan-venv wheelhouse-test
	$(PY) -m tests.stress --rounds $(STRESS_ROUNDS)

bench: setup
	$(PY) -m bench

# README's deploy and tear-down blocks, run as written against moto's server (tests/rehearsal): how far the emulator
# gets, resource by resource, into docs/rehearsal.md; each command's output under build/rehearsal. tests/
# test_rehearsal.py runs the same rehearsal in `make test` and keeps docs/rehearsal.md equal to it.
rehearse: setup awscli-venv
	$(PY) -m tests.rehearsal

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	# mypy's settings and the packages it checks are in pyproject.toml; its cache is .mypy_cache.
	$(PY) -m mypy

format: setup
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

clean:
	rm -rf cdk.out .pytest_cache .ruff_cache .mypy_cache
