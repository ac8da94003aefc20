#!/bin/bash
# How results/gpu/h200-embedded.parquet was made: the pipeline itself, config/gpu-embedded.yaml, on the
# lent H200 (vLLM 0.26.0 kit from ../shared/device, staged into /tmp/site). Run from the repo root there.
# A device call lasts at most 10 minutes, so the pipeline runs in the background and each call watches it:
#   bash results/gpu/run-on-h200.sh [seconds to watch]   (starts it, or goes on watching it)
# If the background run did not survive between calls, the next call restarts it; finished runs are kept
# (Snakemake redoes only unfinished ones). Writes $OUT/gpu.tgz with records, logs, tables and figures.
set -uo pipefail
export PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0
if ! python3 -c "import ijson" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .devkit/extra/*.whl
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
state=/tmp/kpad-gpu-run
mkdir -p "$state"
if ! { [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; }; then
  if [ -f "$state/rc" ]; then
    echo "pipeline already finished with rc $(cat "$state/rc")"
  else
    echo "starting the pipeline $(date -u +%T)"
    setsid nohup bash -c "python3 -m snakemake --cores all --configfile config/gpu-embedded.yaml --rerun-incomplete --keep-going > $state/snakemake.log 2>&1; echo \$? > $state/rc" >/dev/null 2>&1 &
    echo $! > "$state/pid"
  fi
fi
end=$((SECONDS + ${1:-560}))
while [ $SECONDS -lt $end ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; do sleep 5; done
echo "watch ended $(date -u +%T); finished runs:"
ls results/runs/*/mix/*/ 2>/dev/null | tr '\n' ' '; echo
grep -E "Finished job|Error|error" "$state/snakemake.log" | tail -5
mkdir -p "${OUT:-/tmp/out}"
tar czf "${OUT:-/tmp/out}/gpu.tgz" results/runs results/logs results/*.parquet figures "$state/snakemake.log" 2>/dev/null
[ -f "$state/rc" ] && echo "pipeline rc $(cat "$state/rc")"
exit 0
