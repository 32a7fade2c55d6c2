"""How the text files of a run, or of another tool's log, are decoded."""

from __future__ import annotations

from pathlib import Path

UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
COMPRESSED = (".gz", ".xz", ".bz2", ".zst", ".zip")  # an archived run's CSVs


def text_encoding(raw: bytes) -> str:
    """UTF-16 where the bytes open with its byte-order mark (a spreadsheet's "Unicode text", a Windows
    shell's `>`), else UTF-8 with any byte-order mark dropped."""
    return "utf-16" if raw[:2] in UTF16_BOMS else "utf-8-sig"


def absent_because(path: Path) -> str:
    """Why a file that is not there cannot be read: "telemetry.csv.gz is compressed: decompress it to read
    it" when an archived copy lies beside it, else "telemetry.csv is missing"."""
    packed = [name for suffix in COMPRESSED if (path.parent / (name := path.name + suffix)).is_file()]
    return f"{packed[0]} is compressed: decompress it to read it" if packed else f"{path.name} is missing"
