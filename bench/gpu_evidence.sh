#!/usr/bin/env bash
# The real-GPU evidence (issue 20) in one batch on a lent GPU machine whose commands may run 10 minutes
# each: `start` launches the whole plan in its own process session and returns at once; each `follow`
# watches it for up to SECONDS and copies every finished result to $OUT. Uses the machine's own python3
# (PyTorch, no TensorFlow, no internet): the README's scripts run unchanged against a stand-in virtualenv.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: bench/gpu_evidence.sh start [WORKDIR]
       bench/gpu_evidence.sh follow SECONDS [WORKDIR]

start   copy this checkout to WORKDIR/repo and run the plan there in the background:
          env      nvidia-smi -q, CPU, Python packages, the query fields this driver accepts, and
                   whether nvidia-smi dmon --gpm-metrics reads the profiling counters (3 s)
          calibrate bench/gpu_calibrate.py --seconds $CALIBRATE_SECONDS: the collector at 100 ms beside an
                   idle spell, a bf16 GEMM, a 2 GiB copy and tiny kernels; what each counter read against
                   what the load should give (calibrate.txt, calibration.json, the run as calibrate.tgz)
          gpu      ./scripts/collect_gpu.sh $GPU_BUDGET --framework torch --interval $GPU_INTERVAL, with
                   nvidia-smi --query-gpu=... -lms 100 beside it (kept as the run's nvidia-smi.csv)
          cpu      ./scripts/collect_cpu.sh $CPU_BUDGET --framework torch on all cores, same preset/batch
          bench    bench/train_throughput.py --device gpu; bench/nvml_cost.py; bench/sampler_overhead.py
          sweep    collect_gpu.sh $SWEEP_BUDGET --no-export at batch $SWEEP_BATCHES, $SWEEP_PRECISION
                   (is batch 2 underusing it?)
          standard collect_gpu.sh $STANDARD_BUDGET --preset standard --no-infer
          tune     collect_gpu.sh $TUNE_BUDGET --tune $TUNE_ARGS --preset $TUNE_PRESET --no-infer, then
                   the same on this machine's CPUs (collect_cpu.sh $TUNE_CPU_BUDGET $TUNE_CPU_ARGS): every
                   trial and the final run of each sweep packed as tune-gpu.tgz and tune-cpu.tgz
          literal  ./scripts/collect_gpu.sh $LITERAL_BUDGET --tune --framework torch, as a user types it
                   (issue 34's done-when: 10m, the default preset and tuning budget, inference included):
                   the sweep's trials and final run packed as literal.tgz (about 11 minutes), and its
                   report against the shipped CPU run LITERAL_BASELINE as literal-report.md
          tunebench bench/train_throughput.py --device gpu at the GPU sweep's chosen setting
                   (tunebench.txt; TUNEBENCH_CLI_STEPS=20 TUNEBENCH_CHUNKS=5 TUNEBENCH_DEVICE=gpu)
          lateness collect_gpu.sh $LATENESS_BUDGET --interval 10ms: the tick's lateness with GPM read
                   off the tick
          profile  bench/step_profile.py --device gpu --preset $TUNE_PRESET at each of PROFILE_SETTINGS
                   (';'-separated option lists): host against kernels, and the allocator's peak (profile.txt)
        each finished step leaves a trimmed run (no checkpoints/, no model/) as WORKDIR/out/STEP.tgz
follow  wait up to SECONDS for the plan to finish, copying WORKDIR/out/* to $OUT as they appear

WORKDIR defaults to /root/gpu-evidence. Budgets: GPU_BUDGET=2m CPU_BUDGET=5m STANDARD_BUDGET=5m
SWEEP_BUDGET=45s SWEEP_BATCHES="8 32" SWEEP_PRECISION=float32|mixed; GPU_INTERVAL=100ms;
TUNE_BUDGET=6m TUNE_ARGS="--tune-budget 3m" TUNE_CPU_BUDGET=3m TUNE_CPU_ARGS="--tune-budget 90s" (with env and
tunebench, 11 minutes of one lent machine)
TUNE_PRESET=standard; LATENESS_BUDGET=30s; LITERAL_BUDGET=10m;
LITERAL_BASELINE=20261124T111406Z-cpu-vm (the same kind of machine's 16 CPUs: small, batch 2, float32);
PROFILE_SETTINGS="--batch 2;--batch 4 --no-tf32;--batch 4;--batch 8 --precision bfloat16;--batch 16 --precision bfloat16";
CALIBRATE_SECONDS=15 (per load, 4 loads); GPU_ARGS="" (more options for the gpu run, e.g. --no-export);
STEPS="env calibrate gpu" (about 5 minutes; the whole plan: STEPS="env calibrate gpu cpu bench sweep
standard" with GPU_BUDGET=5m; any subset runs those).
USAGE
}

NVSMI_FIELDS=timestamp,index,utilization.gpu,temperature.gpu,power.draw,power.draw.instant,clocks.sm,memory.used,clocks_event_reasons.active,power.limit,enforced.power.limit

log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" >>"$WORK/out/plan.log"; }

make_stand_in_venv() {
  local digest
  mkdir -p "$WORK/venv/bin"
  printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" >"$WORK/venv/bin/python"
  chmod +x "$WORK/venv/bin/python"
  digest="$(cksum <"$WORK/repo/pyproject.toml" | cut -d' ' -f1)"
  printf '%s torch\n%s infer\n%s dashboard\n' "$digest" "$digest" "$digest" >"$WORK/venv/.workbench-installed"
}

newest_run() {
  find "$WORK/data/runs" -mindepth 1 -maxdepth 1 -type d -newer "$1" -printf '%T@ %p\n' | sort -n | tail -1 | cut -d' ' -f2-
}

pack() {
  local name="$1" marker="$2" run
  run="$(newest_run "$marker")"
  [[ -n "$run" ]] || { log "$name: no run directory"; return 0; }
  tar -czf "$WORK/out/$name.tgz" -C "$(dirname "$run")" --exclude=checkpoints --exclude=model "$(basename "$run")"
  log "$name: packed $(basename "$run") ($(du -h "$WORK/out/$name.tgz" | cut -f1))"
}

pack_all() {
  local name="$1" marker="$2" runs
  mapfile -t runs < <(find "$WORK/data/runs" -mindepth 1 -maxdepth 1 -type d -newer "$marker" -printf '%f\n' | sort)
  [[ ${#runs[@]} -gt 0 ]] || { log "$name: no run directory"; return 0; }
  tar -czf "$WORK/out/$name.tgz" -C "$WORK/data/runs" --exclude=checkpoints --exclude=model "${runs[@]}"
  log "$name: packed ${#runs[@]} runs ($(du -h "$WORK/out/$name.tgz" | cut -f1))"
}

step_tune() {
  local device script budget marker extra
  for device in gpu cpu; do
    script="collect_$device.sh" budget="$TUNE_BUDGET" extra="$TUNE_ARGS" marker="$WORK/.mark-tune-$device"
    [[ $device == cpu ]] && budget="$TUNE_CPU_BUDGET" extra="$TUNE_CPU_ARGS"
    touch "$marker"
    sleep 1
    log "tune-$device: $script $budget --tune $extra --framework torch --preset $TUNE_PRESET --no-infer"
    # shellcheck disable=SC2086  # $extra: more options, split on spaces
    (cd "$WORK/repo" && WORKBENCH_VENV="$WORK/venv" PYTHONPATH="$WORK/repo" "./scripts/$script" "$budget" --tune $extra \
      --framework torch --preset "$TUNE_PRESET" --no-infer --data-dir "$WORK/data") >"$WORK/logs/tune-$device.log" 2>&1 \
      || log "tune-$device: exit $?"
    grep -E '^Tuning' "$WORK/logs/tune-$device.log" | sed "s/^/  tune-$device| /" >>"$WORK/out/plan.log" || true
    pack_all "tune-$device" "$marker"
    newest_run "$marker" >"$WORK/tune-$device.final" || true
  done
}

# The setting the final run of a sweep (its path in file $1) trained at, as bench/train_throughput.py takes it (loader
# workers and pinned memory left out: the bench's two loops share one process's batches).
tuned_bench_args() {
  local run
  run="$(cat "$1" 2>/dev/null)"
  [[ -n "$run" ]] || return 1
  PYTHONPATH="$WORK/repo" python3 - "$run/run.json" <<'PY'
import json, sys
from runformat.tuning import FINAL, tuning_of
tag = tuning_of(json.loads(open(sys.argv[1]).read()))
if tag is None or tag.role != FINAL:
    sys.exit(1)
print(" ".join(tag.setting.but(loader_workers=0, pin_memory=False).train_args()))
PY
}

step_profile() {
  local settings setting
  IFS=';' read -ra settings <<<"$PROFILE_SETTINGS"
  for setting in "${settings[@]}"; do
    log "profile: step_profile --device gpu --preset $TUNE_PRESET $setting"
    # shellcheck disable=SC2086  # $setting: options, split on spaces
    (cd "$WORK/repo" && PYTHONPATH="$WORK/repo" timeout 120 python3 bench/step_profile.py --device gpu \
      --preset "$TUNE_PRESET" $setting) >>"$WORK/out/profile.txt" 2>&1 || log "profile: $setting: exit $?"
    tail -n 1 "$WORK/out/profile.txt" | sed 's/^/  profile| /' >>"$WORK/out/plan.log"
  done
}

step_literal() {
  local marker="$WORK/.mark-literal" final
  touch "$marker"
  sleep 1
  log "literal: ./scripts/collect_gpu.sh $LITERAL_BUDGET --tune --framework torch"
  (cd "$WORK/repo" && WORKBENCH_VENV="$WORK/venv" PYTHONPATH="$WORK/repo" ./scripts/collect_gpu.sh "$LITERAL_BUDGET" \
    --tune --framework torch --data-dir "$WORK/data") >"$WORK/logs/literal.log" 2>&1 || log "literal: exit $?"
  grep -E '^Tuning' "$WORK/logs/literal.log" | sed 's/^/  literal| /' >>"$WORK/out/plan.log" || true
  tail -n 3 "$WORK/logs/literal.log" | sed 's/^/  literal| /' >>"$WORK/out/plan.log"
  pack_all literal "$marker"
  final="$(newest_run "$marker")"
  [[ -n "$final" ]] || return 0
  log "literal: python3 -m sizing against $LITERAL_BASELINE"
  (cd "$WORK/repo" && PYTHONPATH="$WORK/repo" python3 -m sizing "data/examples/$LITERAL_BASELINE" "$final" \
    --out "$WORK/out/literal-report.md") >>"$WORK/logs/literal.log" 2>&1 || log "literal: sizing exit $?"
}

step_tunebench() {
  local args device="${TUNEBENCH_DEVICE:-gpu}"
  if ! args="$(tuned_bench_args "$WORK/tune-$device.final")"; then
    log "tunebench: no final run of the $device sweep"
    return 0
  fi
  log "tunebench: train_throughput --device $device --preset $TUNE_PRESET $args"
  # shellcheck disable=SC2086  # $args: the setting's options, split on spaces
  (cd "$WORK/repo" && PYTHONPATH="$WORK/repo" python3 bench/train_throughput.py --framework torch --device "$device" \
    --preset "$TUNE_PRESET" $args --cli-steps "${TUNEBENCH_CLI_STEPS:-20}" --chunks "${TUNEBENCH_CHUNKS:-5}") \
    >"$WORK/out/tunebench.txt" 2>&1 || log "tunebench: exit $?"
  tail -n 1 "$WORK/out/tunebench.txt" | sed 's/^/  tunebench| /' >>"$WORK/out/plan.log"
}

collect_run() {
  local name="$1" script="$2"
  shift 2
  local marker="$WORK/.mark-$name" rc=0
  touch "$marker"
  sleep 1
  log "$name: $script $*"
  (cd "$WORK/repo" && WORKBENCH_VENV="$WORK/venv" PYTHONPATH="$WORK/repo" "./scripts/$script" "$@" \
    --data-dir "$WORK/data") >"$WORK/logs/$name.log" 2>&1 || rc=$?
  log "$name: exit $rc"
  tail -n 5 "$WORK/logs/$name.log" | sed "s/^/  $name| /" >>"$WORK/out/plan.log"
  pack "$name" "$marker"
}

step_env() {
  {
    date -u; date +%z; uname -a; nproc; free -g
    lscpu | grep -E 'Model name|^CPU\(s\)|Thread|MHz' || true
    nvidia-smi
    nvidia-smi -q | head -120
    nvidia-smi --query-gpu="$NVSMI_FIELDS" --format=csv -c 1 || echo "query fields refused"
    timeout 20 nvidia-smi dmon --gpm-metrics 1,2,3,5,10 -c 3 || echo "nvidia-smi dmon --gpm-metrics: exit $?"
    python3 -c 'import torch, torchvision, sys; print(sys.version); print(torch.__version__, torchvision.__version__, torch.version.cuda, torch.backends.cudnn.version(), torch.cuda.get_device_name(0)); print("cudnn.allow_tf32", torch.backends.cudnn.allow_tf32, "matmul.allow_tf32", torch.backends.cuda.matmul.allow_tf32)'
    python3 -m pip list 2>/dev/null | grep -iE '^(torch|torchvision|onnx|onnxruntime|onnxscript|psutil|nvidia-ml-py|pandas|numpy|pillow|prometheus)' || true
  } >"$WORK/out/env.txt" 2>&1
}

step_gpu() {
  local smi="$WORK/nvidia-smi-gpu.csv" smi_pid run fields="$NVSMI_FIELDS" name
  name="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 | sed 's/^NVIDIA //')"
  if ! nvidia-smi --query-gpu="$fields" --format=csv -c 1 >/dev/null 2>&1; then
    fields="${fields/,power.draw.instant/}"
    log "gpu: this driver refused the field list; without power.draw.instant"
  fi
  nvidia-smi --query-gpu="$fields" --format=csv -lms 100 >"$smi" 2>"$WORK/logs/nvidia-smi.err" &
  smi_pid=$!
  touch "$WORK/.mark-gpu"
  # shellcheck disable=SC2086  # GPU_ARGS: extra options, split on spaces
  collect_run gpu collect_gpu.sh "$GPU_BUDGET" --framework torch --interval "$GPU_INTERVAL" ${GPU_ARGS:-} \
    --label "${name:-GPU}, torch small, batch 2, float32, $GPU_BUDGET, $GPU_INTERVAL interval (nvidia-smi beside)"
  kill "$smi_pid" 2>/dev/null || true
  wait "$smi_pid" 2>/dev/null || true
  run="$(newest_run "$WORK/.mark-gpu")"
  if [[ -n "$run" ]]; then
    cp "$smi" "$run/nvidia-smi.csv"
    pack gpu "$WORK/.mark-gpu"  # again, now with the log in it
  fi
}

step_calibrate() {
  local cal="$WORK/calibration" rc=0
  rm -rf "$cal"
  log "calibrate: bench/gpu_calibrate.py --seconds $CALIBRATE_SECONDS"
  (cd "$WORK/repo" && PYTHONPATH="$WORK/repo" timeout -s INT -k 30 $((CALIBRATE_SECONDS * 4 + 180)) \
    python3 bench/gpu_calibrate.py --seconds "$CALIBRATE_SECONDS" --out "$cal") >"$WORK/out/calibrate.txt" 2>&1 \
    || rc=$?
  log "calibrate: exit $rc"
  tail -n 1 "$WORK/out/calibrate.txt" | sed 's/^/  calibrate| /' >>"$WORK/out/plan.log"
  if [[ -f "$cal/calibration.json" ]]; then cp "$cal/calibration.json" "$WORK/out/"; fi
  if [[ -d "$cal/data/runs" ]]; then
    tar -czf "$WORK/out/calibrate.tgz" -C "$WORK" calibration
    log "calibrate: packed $(find "$cal/data/runs" -mindepth 1 -maxdepth 1 -printf '%f ')" \
      "($(du -h "$WORK/out/calibrate.tgz" | cut -f1))"
  fi
}

step_bench() {
  log "bench: train_throughput --device gpu"
  (cd "$WORK/repo" && PYTHONPATH="$WORK/repo" python3 bench/train_throughput.py --framework torch --device gpu \
    --cli-steps 120 --chunks "${BENCH_CHUNKS:-8}") >"$WORK/out/bench.txt" 2>&1 || log "bench: train_throughput exit $?"
  log "bench: nvml_cost"
  (cd "$WORK/repo" && python3 bench/nvml_cost.py) >>"$WORK/out/bench.txt" 2>&1 || log "bench: nvml_cost exit $?"
  log "bench: sampler_overhead"
  (cd "$WORK/repo" && PYTHONPATH="$WORK/repo:$WORK/repo/bench" python3 bench/sampler_overhead.py --scale 0.25) \
    >>"$WORK/out/bench.txt" 2>&1 || log "bench: sampler_overhead exit $?"
}

step_sweep() {
  local batch
  for batch in $SWEEP_BATCHES; do
    collect_run "sweep-b$batch-$SWEEP_PRECISION" collect_gpu.sh "$SWEEP_BUDGET" --framework torch --batch "$batch" \
      --precision "$SWEEP_PRECISION" --interval 100ms --no-export \
      --label "H100, torch small, batch $batch, $SWEEP_PRECISION, $SWEEP_BUDGET"
  done
}

wanted() { [[ " $STEPS " == *" $1 "* ]]; }

plan() {
  log "plan: start (steps $STEPS; GPU $GPU_BUDGET, CPU $CPU_BUDGET, standard $STANDARD_BUDGET)"
  wanted env && { step_env || log "env: exit $?"; log "env: done"; }
  wanted calibrate && { step_calibrate || log "calibrate: exit $?"; }
  wanted gpu && { step_gpu || log "gpu: exit $?"; }
  if wanted cpu; then
    collect_run cpu collect_cpu.sh "$CPU_BUDGET" --framework torch \
    --label "16-core CPU of the H100 machine, torch small, batch 2, float32, $CPU_BUDGET" || log "cpu: exit $?"
  fi
  wanted bench && { step_bench || log "bench: exit $?"; }
  wanted sweep && { step_sweep || log "sweep: exit $?"; }
  if wanted standard; then
    collect_run standard collect_gpu.sh "$STANDARD_BUDGET" --framework torch --preset standard --no-infer \
    --label "H100, torch standard, batch 2, float32, $STANDARD_BUDGET" || log "standard: exit $?"
  fi
  wanted tune && { step_tune || log "tune: exit $?"; }
  wanted literal && { step_literal || log "literal: exit $?"; }
  wanted tunebench && { step_tunebench || log "tunebench: exit $?"; }
  wanted profile && { step_profile || log "profile: exit $?"; }
  if wanted lateness; then
    collect_run lateness collect_gpu.sh "$LATENESS_BUDGET" --framework torch --interval 10ms --no-export --no-infer \
    --label "H100, torch small, batch 2, float32, $LATENESS_BUDGET, 10 ms interval" || log "lateness: exit $?"
  fi
  log "plan: done"
  touch "$WORK/plan.done"
}

follow() {
  local seconds="$1" deadline
  deadline=$((SECONDS + seconds))
  while :; do
    if [[ -n "${OUT:-}" ]]; then cp -u "$WORK"/out/* "$OUT"/ 2>/dev/null || true; fi
    [[ -f "$WORK/plan.done" || $SECONDS -ge $deadline ]] && break
    sleep 5
  done
  cat "$WORK/out/plan.log"
  for f in "$WORK"/logs/*.log; do
    [[ -f "$f" ]] && printf '%s: %s\n' "$(basename "$f")" "$(tail -c 300 "$f" | tr '\r' '\n' | tail -n 1)"
  done
  return 0
}

main() {
  [[ $# -ge 1 ]] || { usage >&2; exit 2; }
  : "${GPU_BUDGET:=2m}" "${GPU_INTERVAL:=100ms}" "${CPU_BUDGET:=5m}" "${STANDARD_BUDGET:=5m}" "${SWEEP_BUDGET:=45s}"
  : "${SWEEP_BATCHES:=8 32}" "${SWEEP_PRECISION:=float32}" "${STEPS:=env calibrate gpu}" "${CALIBRATE_SECONDS:=15}"
  : "${TUNE_BUDGET:=6m}" "${TUNE_ARGS:=--tune-budget 3m}" "${TUNE_CPU_BUDGET:=3m}" "${TUNE_CPU_ARGS:=--tune-budget 90s}"
  : "${TUNE_PRESET:=standard}" "${LATENESS_BUDGET:=30s}" "${LITERAL_BUDGET:=10m}"
  : "${LITERAL_BASELINE:=20261124T111406Z-cpu-vm}"
  : "${PROFILE_SETTINGS:=--batch 2;--batch 4 --no-tf32;--batch 4;--batch 8 --precision bfloat16;--batch 16 --precision bfloat16}"
  export LATENESS_BUDGET LITERAL_BUDGET LITERAL_BASELINE PROFILE_SETTINGS GPU_BUDGET GPU_INTERVAL CPU_BUDGET STANDARD_BUDGET SWEEP_BUDGET SWEEP_BATCHES SWEEP_PRECISION STEPS
  export TUNE_BUDGET TUNE_ARGS TUNE_CPU_BUDGET TUNE_CPU_ARGS TUNE_PRESET
  export CALIBRATE_SECONDS
  case "$1" in
    -h | --help) usage ;;
    start)
      WORK="${2:-/root/gpu-evidence}"
      mkdir -p "$WORK/out" "$WORK/logs" "$WORK/data"
      rm -rf "$WORK/repo"
      mkdir -p "$WORK/repo"
      tar -C "$(cd "$(dirname "$0")/.." && pwd)" --exclude=./.venv --exclude=./.git --exclude=./data/runs \
        --exclude=./data/datasets -cf - . | tar -C "$WORK/repo" -xf -
      make_stand_in_venv
      export WORK
      setsid nohup "$WORK/repo/bench/gpu_evidence.sh" plan "$WORK" >"$WORK/logs/plan.out" 2>&1 </dev/null &
      echo "started: $WORK"
      ;;
    plan)
      WORK="$2"
      plan
      ;;
    follow)
      [[ $# -ge 2 ]] || { usage >&2; exit 2; }
      WORK="${3:-/root/gpu-evidence}"
      follow "$2"
      ;;
    *) usage >&2; exit 2 ;;
  esac
}

main "$@"
