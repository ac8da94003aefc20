#!/bin/bash
# How the results under results/gpu/ were made: the pipeline itself on the lent H200 (vLLM 0.26.0 kit from
# ../shared/device, staged into /tmp/site). Run from the repo root there.
# A device call lasts at most 10 minutes, so the pipeline runs in the background and each call watches it:
#   KPAD_CONFIG=config/gpu/configurations.yaml KPAD_ARGS="--config repeats=2" \
#     bash results/gpu/run-on-h200.sh [seconds to watch]        (starts it, or goes on watching it)
# (defaults: config/gpu/embedded.yaml, no extra arguments). KPAD_TARGETS="results/runs/m/c/x/r1.json ...": build only
# these (they go before the options: after --configfile, Snakemake would read them as more config files, as the
# lease of 2026-12-02 13:18 found). If the background run did not survive between
# calls, the next call restarts it; finished runs are kept (Snakemake redoes only unfinished ones).
# KPAD_PRESEED=DIR (a carried folder holding runs/ and benchmarks/ of an earlier lease's repeats): the model
# and corpora are made first, then DIR's records are copied under results/ and kept (Snakemake reruns on
# parameter changes only), so a later repeat continues the earlier lease's chain of runs.
# Each copy of the tree and config has its own state folder (/tmp/kpad-gpu-run/<copy>/<config>), so several configs,
# or one config with other KPAD_ARGS in a fresh copy of the tree, can run one after another in one lease.
# Writes $OUT/gpu.tgz with records, logs, benchmarks, tables and figures (again after every finished run).
set -uo pipefail
export PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0
config=${KPAD_CONFIG:-config/gpu/embedded.yaml}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
state=/tmp/kpad-gpu-run/$(basename "$PWD")/$(basename "$config" .yaml)
mkdir -p "$state"
if ! { [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; }; then
  if [ -f "$state/rc" ]; then
    echo "pipeline already finished with rc $(cat "$state/rc")"
  else
    # The kit is installed with --no-compile, and where PYTHONDONTWRITEBYTECODE is set (as on the VM that makes the
    # kit) no .pyc is ever written: each boot then compiles what it imports, in the API server and again in its engine
    # core. In the 8B lease of 2026-12-07 a boot spent 50-57 s outside the weights and the engine's init. Say whether
    # the kit and the device's torch / transformers / triton had .pyc files, then compile them once per machine.
    if [ ! -f /tmp/site/.compiled ]; then
      t0=$SECONDS
      dirs=$(python3 -c "import importlib.util as u
for n in ('torch', 'transformers', 'triton'):
    s = u.find_spec(n)
    print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')")
      for d in /tmp/site $dirs; do
        echo "before byte-compiling: $d has .pyc files: $(find "$d" -name '*.pyc' -print -quit | grep -c .)"
      done
      # shellcheck disable=SC2086 # one folder per word
      python3 -m compileall -q -j 0 /tmp/site $dirs > /dev/null 2>&1; touch /tmp/site/.compiled
      echo "byte-compiled in $((SECONDS - t0)) s; python writes .pyc itself: \
$(python3 -c 'import sys; print(not sys.dont_write_bytecode)')"
    fi
    echo "starting the pipeline $(date -u +%T): $config ${KPAD_ARGS:-} ${KPAD_TARGETS:-}"
    seed=""
    if [ -n "${KPAD_PRESEED:-}" ]; then
      targets=$(python3 -c "import sys, yaml; c = yaml.safe_load(open(sys.argv[1])); \
print(' '.join([f'results/corpora/{x}.jsonl' for x in c['measure_corpora']] + [f'results/models/{m}' for m in c['models']]))" "$config")
      seed="python3 -m snakemake $targets --cores all --configfile $config ${KPAD_ARGS:-} && \
        cp -r $KPAD_PRESEED/. results/ && find $KPAD_PRESEED -type f | sed 's|^$KPAD_PRESEED/|results/|' | xargs touch && "
      KPAD_ARGS="${KPAD_ARGS:-} --rerun-triggers params"
    fi
    setsid nohup bash -c "{ $seed python3 -m snakemake ${KPAD_TARGETS:-} --cores all --configfile $config ${KPAD_ARGS:-} --rerun-incomplete \
      --keep-going; } > $state/snakemake.log 2>&1; echo \$? > $state/rc" >/dev/null 2>&1 &
    echo $! > "$state/pid"
  fi
fi
archive() {  # written anew after every finished run, so a call cut short (device budget) still brings them back
  mkdir -p "${OUT:-/tmp/out}"
  local paths
  # figures: only what this pipeline drew (the tree's committed figures, 31 MiB on 2026-12-07, would push the
  # archive past the 16 MiB a file that comes back from the device)
  paths=$(ls -d results/runs results/logs results/benchmarks results/*.parquet results/*.md "$state/snakemake.log" \
    2>/dev/null; find figures -type f -newer "$state/pid" 2>/dev/null)
  # shellcheck disable=SC2086 # one path per word (none has spaces)
  tar czf "${OUT:-/tmp/out}/gpu.tgz.part" $paths && mv "${OUT:-/tmp/out}/gpu.tgz.part" "${OUT:-/tmp/out}/gpu.tgz"
}
end=$((SECONDS + ${1:-560})); archived=""
while [ $SECONDS -lt $end ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; do
  done_now=$(ls results/runs/*/*/*/ 2>/dev/null | wc -l)
  [ "$done_now" = "$archived" ] || { archive; archived=$done_now; }
  sleep 5
done
echo "watch ended $(date -u +%T); finished runs:"
ls results/runs/*/*/*/ 2>/dev/null | tr '\n' ' '; echo
grep -E "INFO run:|Error|error" "$state/snakemake.log" | tail -8
archive
[ -f "$state/rc" ] && echo "pipeline rc $(cat "$state/rc")"
exit 0
