"""TFRecord files of tf.train.Example messages, written and read without TensorFlow.

The PyTorch path and the dataset generator must work where TensorFlow is not installed, and Model
Garden's input pipeline must still read the same files. A TFRecord is a sequence of
`uint64 length, uint32 masked crc32c(length), data, uint32 masked crc32c(data)` (little endian); a
tf.train.Example is a small protobuf we encode and decode by hand (wire types 0, 2 and 5 only).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from pathlib import Path

Feature = list[bytes] | list[float] | list[int]


class RecordError(ValueError):
    """A TFRecord file or tf.Example that is not what it should be."""


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def python_crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _native_crc32c() -> Callable[[bytes], int] | None:
    """google-crc32c's C checksum (hundreds of MB/s; the loop above does ~5 MB/s, half the time of
    generating a dataset), or None where it is not installed (a GPU image with only torch)."""
    try:
        from google_crc32c import value
    except ImportError:
        return None
    try:
        from google_crc32c import implementation
    except ImportError:
        return value
    return value if implementation == "c" else None


crc32c: Callable[[bytes], int] = _native_crc32c() or python_crc32c


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class RecordWriter:
    """Appends records to a TFRecord file."""

    def __init__(self, path: Path) -> None:
        self._handle = Path(path).open("wb")  # noqa: SIM115  (closed by close() / __exit__)

    def write(self, record: bytes) -> None:
        length = struct.pack("<Q", len(record))
        self._handle.write(length + struct.pack("<I", masked_crc(length)))
        self._handle.write(record + struct.pack("<I", masked_crc(record)))

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def read_record_file(path: Path, verify: bool = False) -> Iterator[bytes]:
    """The records of one file; the length checksum is always checked, the data's only with `verify`."""
    with Path(path).open("rb") as handle:
        while header := handle.read(12):
            if len(header) < 12:
                raise RecordError(f"{path}: truncated record header")
            length = struct.unpack("<Q", header[:8])[0]
            if struct.unpack("<I", header[8:])[0] != masked_crc(header[:8]):
                raise RecordError(f"{path}: corrupted record length")
            data = handle.read(length)
            footer = handle.read(4)
            if len(data) < length or len(footer) < 4:
                raise RecordError(f"{path}: truncated record")
            if verify and struct.unpack("<I", footer)[0] != masked_crc(data):
                raise RecordError(f"{path}: corrupted record data")
            yield data


# --- protobuf wire format ---------------------------------------------------------------------


def _varint(value: int) -> bytes:
    value &= 0xFFFFFFFFFFFFFFFF  # negative int64 as two's complement, 10 bytes
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise RecordError("truncated varint in tf.Example")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int, bytes | int]]:
    """(field number, wire type, payload) of one message; varints as ints, others as bytes."""
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
            yield number, wire, value
        elif wire == 2:
            length, pos = _read_varint(data, pos)
            yield number, wire, data[pos : pos + length]
            pos += length
        elif wire == 5:
            yield number, wire, data[pos : pos + 4]
            pos += 4
        elif wire == 1:
            yield number, wire, data[pos : pos + 8]
            pos += 8
        else:
            raise RecordError(f"unsupported protobuf wire type {wire} in tf.Example")


def encode_example(features: dict[str, tuple[str, Feature]]) -> bytes:
    """A serialized tf.train.Example; each feature is (kind, values) with kind bytes, float or int64."""
    entries = b""
    for key, (kind, values) in features.items():
        if kind == "bytes":
            feature = _field(1, b"".join(_field(1, value) for value in values))
        elif kind == "float":
            feature = _field(2, _field(1, struct.pack(f"<{len(values)}f", *values)))
        elif kind == "int64":
            feature = _field(3, _field(1, b"".join(_varint(int(value)) for value in values)))
        else:
            raise ValueError(f"unknown feature kind {kind!r}")
        entries += _field(1, _field(1, key.encode()) + _field(2, feature))
    return _field(1, entries)


def decode_example(data: bytes) -> dict[str, Feature]:
    """The features of a serialized tf.train.Example: name -> list of bytes, floats or ints."""
    features: dict[str, Feature] = {}
    for number, _wire, example_field in _fields(data):
        if number != 1 or not isinstance(example_field, bytes):
            continue
        for entry_number, _, entry in _fields(example_field):
            if entry_number != 1 or not isinstance(entry, bytes):
                continue
            key, value = "", b""
            for part_number, _, part in _fields(entry):
                if part_number == 1 and isinstance(part, bytes):
                    key = part.decode()
                elif part_number == 2 and isinstance(part, bytes):
                    value = part
            features[key] = _decode_feature(value)
    return features


def _decode_feature(data: bytes) -> Feature:
    for kind, _, payload in _fields(data):
        if not isinstance(payload, bytes):
            continue
        if kind == 1:
            return [
                value for number, _, value in _fields(payload) if number == 1 and isinstance(value, bytes)
            ]
        if kind == 2:
            floats: list[float] = []
            for number, wire, value in _fields(payload):
                if number == 1 and isinstance(value, bytes):
                    count = len(value) // 4
                    floats += (
                        struct.unpack(f"<{count}f", value[: 4 * count])
                        if wire == 2
                        else [struct.unpack("<f", value)[0]]
                    )
            return floats
        if kind == 3:
            ints: list[int] = []
            for number, wire, value in _fields(payload):
                if number != 1:
                    continue
                if wire == 0 and isinstance(value, int):
                    ints.append(_signed(value))
                elif isinstance(value, bytes):
                    pos = 0
                    while pos < len(value):
                        item, pos = _read_varint(value, pos)
                        ints.append(_signed(item))
            return ints
    return []


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value
