"""A plain PyTorch training loop that reports its progress through the WORKBENCH_PROGRESS protocol, as in the
README ("Your own training job"): no import of the workbench, one open() and one write per step."""

from __future__ import annotations

import argparse
import json
import os
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--batch", type=int, default=64)
parser.add_argument("--width", type=int, default=256)
parser.add_argument("--malformed", action="store_true", help="also write a line that is not JSON")
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
model = torch.nn.Sequential(
    torch.nn.Linear(args.width, args.width), torch.nn.ReLU(), torch.nn.Linear(args.width, 1)
).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
progress = open(os.environ.get("WORKBENCH_PROGRESS", os.devnull), "a", buffering=1)  # noqa: SIM115
for step in range(1, args.steps + 1):
    x = torch.rand(args.batch, args.width, device=device)
    loss = torch.nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    progress.write(json.dumps({"step": step, "examples": step * len(x), "loss": loss.item()}) + "\n")
    if args.malformed and step == args.steps // 2:
        progress.write("this line is not JSON\n")
print(f"trained {args.steps} steps on {device} in {time.process_time():.1f} s of CPU", flush=True)
