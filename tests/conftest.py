"""Whole-suite setup.

TensorFlow and torch each bundle LLVM, and importing torch's (torchvision -> torch._dynamo -> triton) into a
process that already loaded TensorFlow's aborts it ("LLVM ERROR: inconsistency in registered CommandLine
options"); the other order works. The product never loads both in one process (each training and each
inference runtime runs in the framework of its own run), but this test process imports both, so torch goes
first.
"""

from __future__ import annotations

import contextlib

with contextlib.suppress(ImportError):
    import torchvision  # noqa: F401
