"""Whole-suite setup.

TensorFlow and torch each bundle LLVM, and importing torch's (torchvision -> torch._dynamo -> triton) into a
process that already loaded TensorFlow's aborts it ("LLVM ERROR: inconsistency in registered CommandLine
options"); the other order works. The product never loads both in one process (each training and each
inference runtime runs in the framework of its own run), but this test process imports both, so torch goes
first.
"""

from __future__ import annotations

import contextlib
import signal

with contextlib.suppress(ImportError):
    import torchvision  # noqa: F401

# A suite started in the background (`nohup ./scripts/test.sh &`, a CI runner's job) inherits SIGINT
# ignored, and so would every collector and training it starts: the Ctrl-C tests need the terminal's
# default. Python's own handler here restores it for the children (a handler resets to the default on exec).
signal.signal(signal.SIGINT, signal.default_int_handler)
