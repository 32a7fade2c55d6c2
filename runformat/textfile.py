"""How the text files of a run, or of another tool's log, are decoded."""

from __future__ import annotations

UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def text_encoding(raw: bytes) -> str:
    """UTF-16 where the bytes open with its byte-order mark (a spreadsheet's "Unicode text", a Windows
    shell's `>`), else UTF-8 with any byte-order mark dropped."""
    return "utf-16" if raw[:2] in UTF16_BOMS else "utf-8-sig"
