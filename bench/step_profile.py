"""Where a torch training step's time goes: the host against the device's kernels (torch.profiler).

The preset's model (training.torch_model.build_model), SGD with momentum and gradient-norm clipping as the
training uses them, on one synthetic batch kept on the device: the model's own step, without the data
loader. `--warmup` steps, then `--steps` profiled. Per step:

  step_ms              wall time
  kernel_ms_per_step   the device's kernel time (CUDA kernels; nan on a CPU)
  kernels_per_step     kernel launches
  mean_kernel_us       kernel time / launches
  gpu_busy_pct         kernel time / wall time (what NVML's utilization approximates)
  host_ops_per_step    top-level aten operators the host dispatched
  peak_reserved_gib    the most GPU memory torch's allocator held (nan on a CPU)

At a tuned setting (docs/tuning.md): `--precision bfloat16|float16` (autocast, as the training does;
float16 with a gradient scaler on a GPU) and `--tf32` / `--no-tf32` (without either, torch's default).

    python bench/step_profile.py --device gpu --preset standard --batch 2    # on a GPU
    python bench/step_profile.py --device gpu --preset standard --batch 4 --no-tf32   # true float32
    python bench/step_profile.py --device gpu --preset standard --batch 8 --precision bfloat16
    python bench/step_profile.py --quick             # small, batch 1, the CPU

Last line: step_ms=<ms> kernel_ms_per_step=<ms> kernels_per_step=<n> mean_kernel_us=<us> gpu_busy_pct=<pct>
           host_ops_per_step=<n> peak_reserved_gib=<GiB>
(the kernel and memory figures nan on a CPU)
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def parse_args(argv: list[str]) -> argparse.Namespace:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--preset", choices=("small", "standard"), default="small")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--precision", choices=("float32", "bfloat16", "float16"), default="float32")
    parser.add_argument("--tf32", action=argparse.BooleanOptionalAction, help="GPU: TF32 on / off")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.device, args.preset, args.batch, args.warmup, args.steps = "cpu", "small", 1, 1, 2
    if args.batch < 1 or args.warmup < 0 or args.steps < 1:
        parser.error("--batch and --steps must be at least 1, --warmup at least 0")
    return args


def build_step(preset: str, batch: int, device, precision: str = "float32"):  # type: ignore[no-untyped-def]
    """A closure that runs one training step of the preset's model on one synthetic batch on `device`, the
    forward pass under autocast at a precision other than float32."""
    import torch
    from torchloop.plain_step import plain_step

    from training.flops import synthetic_torch_batch
    from training.torch_model import TORCH_PRESETS, build_model, model_config

    config = model_config(preset)
    model = build_model(config).train().to(device)
    images, targets = synthetic_torch_batch(batch, TORCH_PRESETS[preset].image_size)
    images = [image.to(device) for image in images]
    targets = [{key: value.to(device) for key, value in target.items()} for target in targets]
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=config["momentum"])
    step = plain_step(model, optimizer, precision, device, config["clip_grad_norm"])
    return lambda: step(images, targets)


def breakdown(events, steps: int, wall_s: float) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """The per-step figures from the profiler's events."""
    from torch.autograd import DeviceType

    kernels = [e for e in events if e.device_type == DeviceType.CUDA]
    kernel_us = sum(e.time_range.elapsed_us() for e in kernels)
    top_level = [
        e for e in events
        if e.device_type == DeviceType.CPU and e.name.startswith("aten::")
        and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))
    ]  # fmt: skip
    step_ms = wall_s / steps * 1000.0
    kernel_ms = kernel_us / steps / 1000.0 if kernels else math.nan
    return {
        "step_ms": step_ms,
        "kernel_ms_per_step": kernel_ms,
        "kernels_per_step": len(kernels) / steps if kernels else math.nan,
        "mean_kernel_us": kernel_us / len(kernels) if kernels else math.nan,
        "gpu_busy_pct": kernel_ms / step_ms * 100.0 if kernels else math.nan,
        "host_ops_per_step": len(top_level) / steps,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import torch
    from torch.profiler import ProfilerActivity, profile

    if args.device == "gpu" and not torch.cuda.is_available():
        print("step_profile: error: --device gpu: torch sees no CUDA device", file=sys.stderr)
        return 2
    from training.torch_settings import apply_torch_settings

    apply_torch_settings(argparse.Namespace(threads=None, tf32=args.tf32))
    device = torch.device("cuda" if args.device == "gpu" else "cpu")
    sync = torch.cuda.synchronize if args.device == "gpu" else (lambda: None)
    step = build_step(args.preset, args.batch, device, args.precision)
    for _ in range(args.warmup):
        step()
    sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "gpu" else [])
    with profile(activities=activities) as prof:
        started = time.perf_counter()
        for _ in range(args.steps):
            step()
        sync()
        wall_s = time.perf_counter() - started
    found = breakdown(prof.events(), args.steps, wall_s)
    gpu = args.device == "gpu"
    found["peak_reserved_gib"] = torch.cuda.max_memory_reserved(device) / 2**30 if gpu else math.nan
    name = torch.cuda.get_device_name(device) if gpu else "CPU"
    tf32 = {True: ", TF32 on", False: ", TF32 off", None: ""}[args.tf32]
    setting = f"{args.preset}, batch {args.batch}, {args.precision}{tf32}"
    print(f"{name}, torch {torch.__version__}, {setting}, {args.steps} steps profiled after {args.warmup} "
          "(the profiler's own cost is in the wall time)")  # fmt: skip
    print(" ".join(f"{key}={value:.3f}" for key, value in found.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
