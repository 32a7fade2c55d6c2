"""Whole-suite setup.

TensorFlow and torch each bundle LLVM, and importing torch's (torchvision -> torch._dynamo -> triton) into a
process that already loaded TensorFlow's aborts it ("LLVM ERROR: inconsistency in registered CommandLine
options"); the other order works. The product never loads both in one process (each training and each
inference runtime runs in the framework of its own run), but this test process may import both, so torch
goes first: just before TensorFlow's first import, not at startup (torchvision takes ~9 s of CPU to import,
and most tests need neither).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import signal
import sys


class _TorchBeforeTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "tensorflow":
            sys.meta_path.remove(self)
            with contextlib.suppress(ImportError):
                import torchvision  # noqa: F401
        return None  # the regular finders import the module itself


if "tensorflow" not in sys.modules:
    sys.meta_path.insert(0, _TorchBeforeTensorFlow())

# A suite started in the background (`nohup ./scripts/test.sh &`, a CI runner's job) inherits SIGINT
# ignored, and so would every collector and training it starts: the Ctrl-C tests need the terminal's
# default. Python's own handler here restores it for the children (a handler resets to the default on exec).
signal.signal(signal.SIGINT, signal.default_int_handler)
