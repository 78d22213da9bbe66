"""TensorBoard's event file, written here: scalars and text, without importing tensorboard.

tensorboard's own writer imports protobuf, its filesystem layer and boto3: ~23 MiB in a bare
process and 0.2 s, about 10 MiB of the driver's peak in a run. The format is small: TFRecords (a
length, the length's masked CRC-32C, the data, the data's masked CRC-32C) of `Event` protocol
buffers, the first naming the file's version. tests/runtime/records/test_metrics.py reads what this writes
with tensorboard's own loader.
"""

import os
import socket
import struct
import time
from pathlib import Path

FILE_VERSION = "brain.Event:2"
TEXT_PLUGIN = "text"  # TensorBoard's plugin that shows string tensors as Markdown
DT_STRING = 7  # TensorFlow's DataType enum
_MASK_DELTA = 0xA282EAD8


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1  # Castagnoli's polynomial, reflected
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of `data`, as TFRecords check it."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def record(data: bytes) -> bytes:
    """One TFRecord holding `data`."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", _masked(crc32c(length))) + data + struct.pack("<I", _masked(crc32c(data)))


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def event(
    wall_time: float,
    step: int,
    scalars: dict[str, float] | None = None,
    version: str | None = None,
    texts: dict[str, str] | None = None,
) -> bytes:
    """An `Event` protocol buffer: a file version, or a summary of scalars (tag -> value) and of texts (tag ->
    Markdown, as TensorBoard's text plugin reads them) at `step`."""
    out = b"\x09" + struct.pack("<d", wall_time) + b"\x10" + _varint(step & 0xFFFFFFFFFFFFFFFF)
    if version is not None:
        out += _field(3, version.encode())
    values = b"".join(
        _field(1, _field(1, tag.encode()) + b"\x15" + struct.pack("<f", value))
        for tag, value in (scalars or {}).items()
    )
    values += b"".join(_field(1, _text_value(tag, text)) for tag, text in (texts or {}).items())
    if values:
        out += _field(5, values)
    return out


def _text_value(tag: str, text: str) -> bytes:
    """A Summary.Value holding `text` as the text plugin's: metadata naming the plugin, a scalar string tensor."""
    metadata = _field(1, _field(1, TEXT_PLUGIN.encode()))  # SummaryMetadata.plugin_data.plugin_name
    tensor = (
        b"\x08" + _varint(DT_STRING) + _field(2, b"") + _field(8, text.encode())
    )  # dtype, shape (scalar), string_val
    return _field(1, tag.encode()) + _field(9, metadata) + _field(8, tensor)


class EventFile:
    """Appends scalar events to a new events file in `folder`, each record with one write."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}"
        self.fd = os.open(folder / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(self.fd, record(event(time.time(), 0, version=FILE_VERSION)))

    def add_scalars(self, step: int, scalars: dict[str, float]) -> None:
        """One event holding every scalar of `step`."""
        os.write(self.fd, record(event(time.time(), step, scalars)))

    def add_text(self, step: int, tag: str, text: str) -> None:
        """One event holding `text` (Markdown) under `tag` at `step`."""
        os.write(self.fd, record(event(time.time(), step, texts={tag: text})))

    def close(self) -> None:
        """Close the file."""
        os.close(self.fd)
