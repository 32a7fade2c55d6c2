"""The one-line errors a training's failures get in training.json `error`: out of memory and compiler
failures say so in words a tuning sweep (and a person) can match on, whatever the framework."""

from __future__ import annotations

from collections.abc import Iterator

OUT_OF_MEMORY = "out of memory"
COMPILE_FAILED = "compile failed"
ERROR_CHARS = 500
# Exception types whose names mean the allocator gave up (torch CUDA/CPU, TensorFlow, Python itself).
OOM_TYPES = ("OutOfMemoryError", "ResourceExhaustedError", "MemoryError")
OOM_WORDS = ("out of memory", "can't allocate memory", "oom when allocating")
# Where torch's compiler stack raises from (Dynamo tracing, AOTAutograd, Inductor's code generation).
COMPILER_MODULES = ("torch._dynamo", "torch._inductor", "torch._functorch")


class TrainingFailure(RuntimeError):
    """A failure whose message is already its one line (`compile failed: ...`)."""


class CompileFailed(TrainingFailure):
    """The framework's compiler (torch.compile, XLA) could not compile the training step."""

    def __init__(self, compiler: str, cause: BaseException) -> None:
        super().__init__(f"{COMPILE_FAILED} ({compiler}): {one_line(cause)}")


def chain(exc: BaseException) -> Iterator[BaseException]:
    """exc, then its causes and contexts, each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def out_of_memory(exc: BaseException) -> BaseException | None:
    """The exception in exc's chain that says memory ran out, None when none does."""
    for link in chain(exc):
        names = {cls.__name__ for cls in type(link).__mro__}
        if names & set(OOM_TYPES) or any(word in str(link).lower() for word in OOM_WORDS):
            return link
    return None


def from_compiler(exc: BaseException) -> bool:
    """Whether torch's compiler stack raised exc (or an exception in its chain)."""
    return any(type(link).__module__.startswith(COMPILER_MODULES) for link in chain(exc))


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:ERROR_CHARS]


def failure_line(exc: BaseException) -> str:
    """training.json's `error` for exc: `out of memory: ...`, `compile failed (...): ...`, else
    `Type: message`, one line."""
    oom = out_of_memory(exc)
    if oom is not None:
        text = " ".join(str(oom).split()) or type(oom).__name__
        return f"{OUT_OF_MEMORY}: {text}"[:ERROR_CHARS]
    if isinstance(exc, TrainingFailure):
        return " ".join(str(exc).split())[:ERROR_CHARS]
    return one_line(exc)
