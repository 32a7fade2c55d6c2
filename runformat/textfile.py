"""How the text files of a run, or of another tool's log, are decoded."""

from __future__ import annotations

import bz2
import gzip
import lzma
import re
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
COMPRESSED = (".gz", ".xz", ".bz2", ".zst", ".zip")  # an archived run's CSVs


def text_encoding(raw: bytes) -> str:
    """UTF-16 where the bytes open with its byte-order mark (a spreadsheet's "Unicode text", a Windows
    shell's `>`), else UTF-8 with any byte-order mark dropped."""
    return "utf-16" if raw[:2] in UTF16_BOMS else "utf-8-sig"


READABLE_PACKINGS: dict[str, Callable[[bytes], bytes]] = {
    ".gz": gzip.decompress, ".xz": lzma.decompress, ".bz2": bz2.decompress
}  # fmt: skip  # and .zip of one file; .zst needs a library the standard one lacks
PACKING_ERRORS = (OSError, EOFError, ValueError, lzma.LZMAError, zlib.error, zipfile.BadZipFile)


def packed_copy(path: Path) -> Path | None:
    """The compressed copy of a file that is not there (`telemetry.csv.gz`: an archived run), the first of
    COMPRESSED found; None without one."""
    return next((p for suffix in COMPRESSED if (p := path.parent / (path.name + suffix)).is_file()), None)


def unpacked(packed: Path) -> tuple[bytes | None, str]:
    """A compressed copy's bytes decompressed (gzip, xz, bzip2, a zip of that one file) and the note
    "telemetry.csv.gz: read decompressed"; else None and why not ("… is compressed: decompress it to read
    it", "… is unreadable (…)")."""
    try:
        if packed.suffix == ".zip":
            with zipfile.ZipFile(packed) as archive:
                members = [name for name in archive.namelist() if not name.endswith("/")]
                if len(members) != 1:
                    return None, f"{packed.name} holds {len(members)} files: unpack it to read it"
                raw = archive.read(members[0])
        elif packed.suffix in READABLE_PACKINGS:
            raw = READABLE_PACKINGS[packed.suffix](packed.read_bytes())
        else:
            return None, f"{packed.name} is compressed: decompress it to read it"
    except PACKING_ERRORS as exc:
        return None, f"{packed.name} is unreadable ({type(exc).__name__}: {exc})".splitlines()[0]
    return raw, f"{packed.name}: read decompressed"


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
