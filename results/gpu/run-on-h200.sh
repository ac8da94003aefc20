#!/bin/bash
# How results/gpu/h200-embedded.parquet was made: the pipeline itself, config/gpu-embedded.yaml, on the
# lent H200 (vLLM 0.26.0 kit from ../shared/device, staged into /tmp/site). Run from the repo root there,
# as many times as needed (each device call is at most 10 minutes; finished runs are kept):
#   bash results/gpu/run-on-h200.sh [seconds]
# Writes $OUT/gpu.tgz with the run records, logs, Parquet tables and figures.
set -uo pipefail
export PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0
if ! python3 -c "import ijson" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .devkit/extra/*.whl
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
timeout "${1:-540}" python3 -m snakemake --cores all --configfile config/gpu-embedded.yaml --rerun-incomplete --keep-going
rc=$?
pkill -f vllm.entrypoints.openai.api_server; pkill -f kpadstudy.equivalence
mkdir -p "${OUT:-/tmp/out}"
tar czf "${OUT:-/tmp/out}/gpu.tgz" results/runs results/logs results/equivalence results/*.parquet figures 2>/dev/null
ls results/runs/*/mix/*/ 2>/dev/null | head -40
exit $rc
