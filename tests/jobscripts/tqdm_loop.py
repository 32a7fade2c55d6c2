"""A plain training script whose only progress is a tqdm bar per epoch, with the loss as its postfix."""

from __future__ import annotations

import sys
import time

from tqdm import tqdm

epochs, batches = int(sys.argv[1]), int(sys.argv[2])
for epoch in range(epochs):
    bar = tqdm(range(batches), desc=f"epoch {epoch}", mininterval=0.05)
    for batch in bar:
        time.sleep(0.01)  # the training step
        bar.set_postfix(loss=1.0 / (1 + epoch * batches + batch))
