"""A user's own Keras training script, as it would be before the workbench: model.fit on generated arrays.

`--callback` adds the workbench's KerasProgress callback (the one line a user may add); without it the script
is untouched and its progress comes from Keras's own output (`--progress-format keras`).
"""

from __future__ import annotations

import argparse

import keras
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--rows", type=int, default=2048)
parser.add_argument("--features", type=int, default=32)
parser.add_argument("--width", type=int, default=64)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--callback", action="store_true")
args = parser.parse_args()

callbacks = []
if args.callback:
    from runformat.callbacks import KerasProgress

    callbacks.append(KerasProgress(batch_size=args.batch))

rng = np.random.default_rng(0)
x = rng.random((args.rows, args.features), dtype=np.float32)
y = (x.sum(axis=1) > args.features / 2).astype(np.float32)
model = keras.Sequential(
    [
        keras.Input((args.features,)),
        keras.layers.Dense(args.width, activation="relu"),
        keras.layers.Dense(args.width, activation="relu"),
        keras.layers.Dense(1, activation="sigmoid"),
    ]
)
model.compile(optimizer="adam", loss="binary_crossentropy")
model.fit(x, y, batch_size=args.batch, epochs=args.epochs, callbacks=callbacks)
