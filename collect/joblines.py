"""A job's output, streamed: lines (`\\n`, `\\r\\n` and a lone `\\r` each end one), cleaned of ANSI escapes
and backspaces, searched for progress, and the last few kept for the record. Nothing else is held: the full
output goes to command.log as it comes (collect.command), and a line longer than MAX_LINE_BYTES is cut
(the rest of it dropped, and counted).

Each chunk is cleaned and searched as one text (C speed), each hit then checked again on its own line, so
gigabytes of output that never match cost little more than writing them.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from collections.abc import Callable

from collect.jobpatterns import ProgressPatterns

MAX_LINE_BYTES = 64 * 1024
TAIL_LINES = 15
TAIL_LINE_CHARS = 300
# CSI (colours, cursor moves, erase line), OSC (titles, links), and two-byte escapes.
_ANSI = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_BREAK = re.compile(rb"[\r\n]")

Groups = dict[str, str]


def clean(raw: bytes) -> str:
    """Escapes and backspaces removed, `\\r` made a line end, decoded (invalid UTF-8 replaced)."""
    if b"\x1b" in raw:
        raw = _ANSI.sub(b"", raw)
    if b"\x08" in raw:
        raw = raw.replace(b"\x08", b"")
    return raw.replace(b"\r", b"\n").decode("utf-8", errors="replace")


def matches_in(text: str, patterns: ProgressPatterns) -> list[Groups]:
    """The merged named groups of each line of `text` that a pattern matches, in line order."""
    hits: dict[int, Groups] = {}
    for pattern in patterns.patterns:
        position = 0
        while (found := pattern.search(text, position)) is not None:
            start = text.rfind("\n", 0, found.start()) + 1
            end = text.find("\n", found.start())
            end = len(text) if end < 0 else end
            # Checked again on its line alone: a hit that ran across lines is not a line's match.
            line_match = pattern.search(text, start, end)
            if line_match is not None:
                merged = hits.setdefault(start, {})
                merged.update({k: v for k, v in line_match.groupdict().items() if v is not None})
            position = end + 1
            if position > len(text):
                break
    return [hits[start] for start in sorted(hits)]


class LineScanner:
    """Fed the command's raw output chunk by chunk (from the output pump's thread); calls `on_match(groups)`
    for each line a pattern matches, in order."""

    def __init__(
        self,
        patterns: ProgressPatterns,
        on_match: Callable[[Groups], None],
        tail_lines: int = TAIL_LINES,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self.patterns = patterns
        self.on_match = on_match
        self.max_line_bytes = max_line_bytes
        self.output_bytes = 0
        self.matched_lines = 0
        self.cut_lines = 0
        self._tail: deque[str] = deque(maxlen=tail_lines)
        self._partial = b""
        self._cutting = False  # inside a line already cut: drop until its end
        self._lock = threading.Lock()

    def feed(self, chunk: bytes) -> None:
        with self._lock:
            self._feed(chunk)

    def close(self) -> None:
        """The output ended: a last line without its end still counts."""
        with self._lock:
            if self._partial:
                self._scan(self._partial)
                self._partial = b""
            self._cutting = False

    def tail(self) -> list[str]:
        with self._lock:
            return list(self._tail)

    def _feed(self, chunk: bytes) -> None:
        self.output_bytes += len(chunk)
        last_break = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        if last_break < 0:
            self._grow(chunk)
            return
        head, rest = chunk[: last_break + 1], chunk[last_break + 1 :]
        if self._cutting:
            first = _BREAK.search(head)
            head = head[first.start() :] if first else b""  # the cut line's remainder is dropped
            self._cutting = False
        self._scan(self._partial + head)
        self._partial = b""
        self._grow(rest)

    def _grow(self, piece: bytes) -> None:
        """A line still without its end: kept up to max_line_bytes, the rest of it dropped."""
        if self._cutting or not piece:
            return
        room = self.max_line_bytes - len(self._partial)
        if len(piece) <= room:
            self._partial += piece
            return
        self._partial += piece[: max(room, 0)]
        self._scan(self._partial)  # what was kept of the long line is still a line
        self._partial = b""
        self._cutting = True
        self.cut_lines += 1

    def _keep_tail(self, text: str) -> None:
        """The last non-empty lines of text, looked for from its end (a bounded number of lines)."""
        keep = self._tail.maxlen or 1
        kept: list[str] = []
        end, looks = len(text), 0
        while end > 0 and len(kept) < keep and looks < 20 * keep:
            start = text.rfind("\n", 0, end) + 1
            line = text[start:end].strip()
            if line:
                kept.append(line[:TAIL_LINE_CHARS])
            end, looks = start - 1, looks + 1
        self._tail.extend(reversed(kept))

    def _scan(self, raw: bytes) -> None:
        text = clean(raw)
        self._keep_tail(text)
        if self.patterns.empty:
            return
        for groups in matches_in(text, self.patterns):
            self.matched_lines += 1
            self.on_match(groups)
