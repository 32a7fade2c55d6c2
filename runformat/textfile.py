"""How the text files of a run, or of another tool's log, are decoded."""

from __future__ import annotations

import re
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


_DECIMAL_COMMA = re.compile(r"\d,\d")


SPREADSHEET_SEPARATORS = {";": "';'", "\t": "tabs"}  # a decimal-comma locale's CSV; "Text", "Unicode Text"
UTF8_BOM = b"\xef\xbb\xbf"


def _spreadsheet_separator(header: str) -> str | None:
    """`;` or a tab where a header has one and no `,`: the run's CSVs hold numbers and one-word text only."""
    if "," in header:
        return None
    return next((s for s in SPREADSHEET_SEPARATORS if s in header), None)


def needs_decoding(raw: bytes) -> bool:
    """Whether a CSV's bytes are other than plain comma-separated UTF-8 (a byte-order mark, UTF-16, a
    spreadsheet's separator): then csv_text reads them."""
    if raw.startswith(UTF8_BOM) or raw[:2] in UTF16_BOMS:
        return True
    return _spreadsheet_separator(raw[: raw.find(b"\n")].decode("utf-8", "replace")) is not None


def csv_text(raw: bytes, name: str) -> tuple[str, str | None]:
    """A CSV's bytes as comma-separated text (text_encoding, comma_separated), and the note if converted."""
    return comma_separated(raw.decode(text_encoding(raw), errors="replace"), name)


def comma_separated(text: str, name: str) -> tuple[str, str | None]:
    """A CSV a spreadsheet saved with `;` between cells (a locale that writes `2,5` for 2.5) or tabs (its
    "Text" and "Unicode Text"), as the comma-separated text it stands for, and the note that says so; other
    text as it is."""
    separator = _spreadsheet_separator(text.split("\n", 1)[0])
    if separator is None:
        return text, None
    decimal = bool(_DECIMAL_COMMA.search(text))
    converted = (text.replace(",", ".") if decimal else text).replace(separator, ",")
    mark = " and ',' as the decimal mark" if decimal else ""
    said = SPREADSHEET_SEPARATORS[separator]
    return converted, f"{name}: cells separated by {said}{mark} (a spreadsheet saved it): read as such"
