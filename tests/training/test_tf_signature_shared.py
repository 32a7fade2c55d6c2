"""A process loads a SavedModel once: evaluate, detect, the TF runtimes and the ONNX conversion share the
signature (runtimes/tf_savedmodel.py's load_signature), without TensorFlow here: the load is a fake."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from training.inference.runtimes import tf_savedmodel, tf_xla
from training.inference.runtimes.base import SAVED_MODEL_FILE


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, str]]:
    made: list[tuple[Path, str]] = []
    fake_tf = SimpleNamespace(__version__="2.x", function=lambda fn, jit_compile: fn)

    def load(run_dir: Path, device: str):
        made.append((run_dir, device))
        return fake_tf, object(), f"/{device.upper()}:0"

    monkeypatch.setattr(tf_savedmodel, "_SIGNATURES", {})
    monkeypatch.setattr(tf_savedmodel, "_load_signature", load)
    return made


def _export(run_dir: Path) -> Path:
    model = run_dir / SAVED_MODEL_FILE
    model.parent.mkdir(parents=True, exist_ok=True)
    model.write_bytes(b"graph")
    return model


def test_a_model_is_loaded_once_per_device(tmp_path: Path, loads: list) -> None:
    _export(tmp_path)
    assert not tf_savedmodel.signature_loaded(tmp_path, "cpu")
    first = tf_savedmodel.load_signature(tmp_path, "cpu")
    assert tf_savedmodel.signature_loaded(tmp_path, "cpu")
    assert tf_savedmodel.load_signature(tmp_path, "cpu") is first
    assert not tf_savedmodel.signature_loaded(tmp_path, "gpu")
    tf_savedmodel.load_signature(tmp_path, "gpu")
    assert loads == [(tmp_path, "cpu"), (tmp_path, "gpu")]


def test_a_new_export_is_loaded_again(tmp_path: Path, loads: list) -> None:
    model = _export(tmp_path)
    first = tf_savedmodel.load_signature(tmp_path, "cpu")
    stat = model.stat()
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert not tf_savedmodel.signature_loaded(tmp_path, "cpu")
    assert tf_savedmodel.load_signature(tmp_path, "cpu") is not first
    assert len(loads) == 2


def test_tf_xla_says_when_it_wraps_the_loaded_model(tmp_path: Path, loads: list) -> None:
    _export(tmp_path)
    assert tf_xla.load(tmp_path, "cpu").notes == []  # the first to load it: load_s is the load
    assert tf_xla.load(tmp_path, "cpu").notes == [tf_xla.SHARED_NOTE]
    assert len(loads) == 1


def test_a_missing_model_is_not_a_key_error(tmp_path: Path, loads: list) -> None:
    assert not tf_savedmodel.signature_loaded(tmp_path, "cpu")


def test_evaluate_and_detect_load_once_and_a_refused_load_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """postrun's predictor takes the shared load; when it cannot (TensorFlow sees no GPU), the reason
    becomes the RunDirError that `python -m training evaluate` prints as its one line."""
    from training.errors import RunDirError
    from training.inference.runtimes.base import CannotTake
    from training.postrun import _tensorflow_predictor

    _export(tmp_path)
    calls: list[str] = []

    def refuse(run_dir: Path, device: str):
        calls.append(device)
        raise CannotTake("TensorFlow 2.x sees no GPU")

    monkeypatch.setattr(tf_savedmodel, "_SIGNATURES", {})
    monkeypatch.setattr(tf_savedmodel, "_load_signature", refuse)
    with pytest.raises(RunDirError, match=r"^TensorFlow 2\.x sees no GPU$"):
        _tensorflow_predictor(tmp_path, "gpu")
    assert calls == ["gpu"] and not tf_savedmodel.signature_loaded(tmp_path, "gpu")  # nothing cached


def test_postrun_shares_the_load(tmp_path: Path, loads: list) -> None:
    from training.postrun import _tensorflow_predictor

    _export(tmp_path)
    _tensorflow_predictor(tmp_path, "cpu")
    _tensorflow_predictor(tmp_path, "cpu")
    assert loads == [(tmp_path, "cpu")]  # detect after evaluate: no second load
