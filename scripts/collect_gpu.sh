#!/usr/bin/env bash
# A timed Faster R-CNN training run on the GPU, recorded by the telemetry collector.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: ./scripts/collect_gpu.sh DURATION [OPTIONS]

Trains the Faster R-CNN workload on the NVIDIA GPU for DURATION of wall-clock time (90s, 75m, 2h,
1h30m) while the collector samples the system and the GPU through NVML; then exports, evaluates and
draws detections and runs a short inference benchmark per runtime (not counted in DURATION). Fails at once if there is no NVIDIA driver or the
framework does not see the GPU: it never trains on the CPU instead. First use creates .venv and
installs TensorFlow with its CUDA libraries (with --framework torch: torch and torchvision, no
TensorFlow); the dataset is generated if missing.

Options (passed through):
  --interval 1s           sampling interval (down to 10ms)
  --label TEXT            label shown in the dashboard
  --preset small|standard small: ResNet-18 at 256 px (default); standard: ResNet-50-FPN at 640 px
  --framework tf|torch    tf: TensorFlow Model Garden (default); torch: torchvision, no TensorFlow
  --batch N               batch per device (global: N devices x this)
  --gpus N[,N...]|all     N GPUs: torch DDP over NCCL, tf mirrored strategy; 1,2,4,8 is a sweep
  --precision float32|mixed float32 (default) or each device's mixed precision (GPU float16, CPU bfloat16)
  --tune                  first find the setting that feeds the device best (batch, precision, ...) in
                          short trials, about 20% of DURATION, then train the rest at it (docs/tuning.md)
  --tune-budget 2m        wall time for the trials (at most half of DURATION)
  --tune-space LIST       what --tune searches: batch,precision,threads,channels-last,compile,workers
  --data-dir DIR          where runs and datasets live (default: data)
  --dataset DIR           train on this dataset (default: DATA_DIR/datasets/waldo)
  --no-export             skip export, evaluation, detections and inference
  --no-infer              skip the short inference benchmark after detections (about 1-2 min on a CPU)
  --keep-checkpoints N    checkpoints kept on disk (default 3; each ~124 MB small, ~346 MB standard)
  --checkpoint-every 60s  time between checkpoints
  --verbose               show the training's own output instead of the live progress line
  --prometheus HOST:PORT  also serve the samples at http://HOST:PORT/metrics under node_exporter's and
                          dcgm-exporter's names (PORT alone binds 127.0.0.1; see docs/fleet.md)

Your own training job instead (no training of ours, no export or inference after it):
  ./scripts/collect_gpu.sh DURATION [--label TEXT] [--progress-format keras|lightning|hf|tqdm]
      [--progress-regex REGEX] [--workload-name NAME] [--batch N] [--precision DTYPE]
      [--flops-per-example FLOPS] -- COMMAND [ARGS...]
  runs COMMAND (after checking that NVML sees a GPU), stops it at DURATION (SIGINT, SIGTERM 20 s later),
  turns its progress into the run's step log and records which GPUs it used (README, "Your own training
  job"; exit 124 when DURATION stopped it).
Exit codes: the training's own (0 ok), 124 hard time limit hit, 130 interrupted, 2 usage error
(or too little free space for what the run writes),
1 no usable GPU.
USAGE
}

have_nvidia_driver() {
  [[ -e /proc/driver/nvidia/version ]] || nvidia-smi -L >/dev/null 2>&1
}

main() {
  if [[ $# -eq 0 ]]; then
    usage >&2
    exit 2
  fi
  if [[ "$1" == "-h" || "$1" == "--help" ]]; then
    usage
    return 0
  fi
  # shellcheck source=scripts/lib.sh
  source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
  check_duration "$1"
  check_options --device gpu "${@:2}"
  check_prometheus "$@"
  have_nvidia_driver \
    || die "no NVIDIA driver found (no /proc/driver/nvidia, nvidia-smi failed): use ./scripts/collect_cpu.sh on this machine"
  ensure_venv "$(framework_extras "train,gpu,infer,dashboard" "$@")"
  exec "$PY" -m collect timed --device gpu "$@"
}

main "$@"
