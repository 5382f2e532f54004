"""Deletion vectors as Delta's PROTOCOL.md stores them: descriptors, DV files and their bitmaps.

A deletion vector marks rows of one data file as deleted by their row index (the physical
position in the Parquet file, from 0). The log's `add.deletionVector` holds a descriptor:

- `storageType` `u`: a DV file under the table root named by a UUID, `pathOrInlineDv` being an
  optional random prefix (a folder) and the UUID's 16 bytes in Z85 (20 characters);
  `i`: the bitmap itself, Z85-encoded in the log; `p`: an absolute path of a DV file;
- `offset` (where the DV starts in its file), `sizeInBytes`, `cardinality` (rows deleted).

A DV file is one version byte (1), then per DV: its size (uint32, big-endian), the DV (magic
number 1681511377 as uint32 little-endian, then Delta's RoaringBitmapArray: a uint64 count of
32-bit buckets and, per bucket, its key, the high 32 bits of the row indexes, and a standard
portable 32-bit Roaring bitmap of the low 32 bits, all little-endian), and a CRC-32 of the DV
(big-endian). The inline form is the DV alone, without size or CRC. Roaring containers are read
in all three kinds (array, bitset, run: delta-spark writes runs); they are written as arrays and
bitsets only, which every reader takes.

Row indexes are NumPy uint64 arrays, sorted and unique. (The worked inline example in
PROTOCOL.md decodes to an older, big-endian layout that no current reader accepts; the tests use
bitmaps written by this module and a DV file written by delta-spark instead.)
"""
from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from skiplake.errors import CorruptDeletionVectorError
from skiplake.log.location import basename, dirname, join, norm
from skiplake.log.paths import absolute_path
from skiplake.log.storage_for import storage_at

MAGIC = 1681511377
FORMAT_VERSION = 1
STORAGE_TYPES = ("u", "i", "p")
# The portable Roaring format's cookies and its threshold between array and bitset containers.
_NO_RUNS = 12346
_WITH_RUNS = 12347
_ARRAY_MAX = 4096
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_INDEX = {c: i for i, c in enumerate(_Z85)}


# ------------------------------------------------------------------ descriptors


@dataclass(frozen=True)
class DeletionVector:
    """An `add.deletionVector` (or `remove.deletionVector`) of the log."""
    storage_type: str
    path_or_inline: str
    size_in_bytes: int
    cardinality: int
    offset: int | None = None

    @staticmethod
    def from_json(d: dict[str, Any]) -> "DeletionVector":
        """The descriptor from its JSON object in the log; ValueError for an unknown storageType."""
        storage = d.get("storageType")
        if storage not in STORAGE_TYPES:
            raise ValueError(f"deletion vector storageType {storage!r} is not one of {', '.join(STORAGE_TYPES)}")
        offset = d.get("offset")
        return DeletionVector(storage, str(d["pathOrInlineDv"]), int(d["sizeInBytes"]), int(d["cardinality"]),
                              int(offset) if offset is not None else None)

    def to_json(self) -> dict[str, Any]:
        """The descriptor as the log's JSON object (offset left out when None)."""
        out: dict[str, Any] = {"storageType": self.storage_type, "pathOrInlineDv": self.path_or_inline}
        if self.offset is not None:
            out["offset"] = self.offset
        out["sizeInBytes"] = self.size_in_bytes
        out["cardinality"] = self.cardinality
        return out

    @property
    def unique_id(self) -> str:
        """What tells two DVs of one file apart in the log (with the path, a logical file's key)."""
        base = self.storage_type + self.path_or_inline
        return base if self.offset is None else f"{base}@{self.offset}"

    def file_path(self, table_path: str) -> str | None:
        """The full path of the DV file (a URI on object stores); None for an inline DV."""
        if self.storage_type == "i":
            return None
        if self.storage_type == "p":
            return absolute_path(table_path, self.path_or_inline)
        if len(self.path_or_inline) < 20:
            raise ValueError(f"deletion vector path {self.path_or_inline!r} is shorter than a Z85 UUID")
        prefix, encoded = self.path_or_inline[:-20], self.path_or_inline[-20:]
        name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded, 16))}.bin"
        return join(table_path, prefix, name) if prefix else join(table_path, name)


def unique_id(descriptor: dict[str, Any] | None) -> str:
    """A log descriptor's unique id; '' for none. With the path, it keys a logical file: a DELETE
    logs remove(path, old DV) and add(path, new DV), and replay keeps them apart."""
    if not descriptor:
        return ""
    offset = descriptor.get("offset")
    base = f"{descriptor.get('storageType')}{descriptor.get('pathOrInlineDv')}"
    return base if offset is None else f"{base}@{offset}"


def dv_files(table_path: str, descriptors: Iterable[dict[str, Any] | None]) -> set[str]:
    """The full paths, normalized (location.norm), of the DV files the log descriptors name (inline ones have none)."""
    out = set()
    for d in descriptors:
        if d:
            path = DeletionVector.from_json(d).file_path(table_path)
            if path is not None:
                out.add(norm(path))
    return out


# ------------------------------------------------------------------ reading and writing


def read_deleted_rows(table_path: str, dv: DeletionVector) -> np.ndarray:
    """The row indexes `dv` marks deleted (uint64, sorted), checked against its size, CRC and
    cardinality; CorruptDeletionVectorError names the DV when they do not match."""
    if dv.storage_type == "i":
        data = z85_decode(dv.path_or_inline, dv.size_in_bytes)
    else:
        path = dv.file_path(table_path)
        assert path is not None
        offset = 1 if dv.offset is None else dv.offset  # byte 0 is the version: no DV starts there
        with storage_at(dirname(path)).open_input(basename(path)) as f:
            version = f.read(1)
            if version != bytes([FORMAT_VERSION]):
                raise CorruptDeletionVectorError(path, f"file version {version!r}, expected 1")
            f.seek(offset)
            framed = f.read(4 + dv.size_in_bytes + 4)
        if len(framed) != 8 + dv.size_in_bytes:
            raise CorruptDeletionVectorError(f"{path}@{offset}", "it is cut short")
        (size,) = struct.unpack(">I", framed[:4])
        data, (crc,) = framed[4:4 + size], struct.unpack(">I", framed[4 + size:8 + size])
        if size != dv.size_in_bytes or zlib.crc32(data) & 0xFFFFFFFF != crc:
            raise CorruptDeletionVectorError(f"{path}@{offset}", "its size or checksum does not match its descriptor")
    try:
        rows = deserialize(data)
    except (ValueError, struct.error) as e:  # struct.error: the bitmap ends before its headers say
        raise CorruptDeletionVectorError(f"{dv.unique_id} of {table_path}", str(e)) from e
    if len(rows) != dv.cardinality:
        raise CorruptDeletionVectorError(f"{dv.unique_id} of {table_path}",
                                         f"it holds {len(rows)} rows, its descriptor says {dv.cardinality}")
    return rows


def marked_rows(table_path: str, descriptor: dict[str, Any] | None) -> np.ndarray:
    """The row indexes a log descriptor (`add.deletionVector`) marks deleted; none without one."""
    if not descriptor:
        return np.zeros(0, np.uint64)
    return read_deleted_rows(table_path, DeletionVector.from_json(descriptor))


def write_dv_file(table_path: str, bitmaps: Sequence[np.ndarray], prefix: str = "") -> list[DeletionVector]:
    """One new DV file under the table root holding one DV per bitmap (row indexes), and their
    descriptors. The name is a fresh UUID and the file is created exclusively: never overwritten."""
    ident = uuid.uuid4()
    name = f"deletion_vector_{ident}.bin"
    encoded = prefix + z85_encode(ident.bytes)
    chunks = [bytes([FORMAT_VERSION])]
    out = []
    position = 1
    for rows in bitmaps:
        data = serialize(rows)
        chunks += [struct.pack(">I", len(data)), data, struct.pack(">I", zlib.crc32(data) & 0xFFFFFFFF)]
        out.append(DeletionVector("u", encoded, len(data), len(_sorted_unique(rows)), position))
        position += 8 + len(data)
    if not storage_at(table_path).put_if_absent(join(prefix, name) if prefix else name, b"".join(chunks)):
        raise FileExistsError(join(table_path, prefix, name))  # a fresh UUID: never expected
    return out


def inline(rows: np.ndarray) -> DeletionVector:
    """A small DV kept in the log itself (storageType `i`)."""
    data = serialize(rows)
    return DeletionVector("i", z85_encode(data), len(data), len(_sorted_unique(rows)))


# ------------------------------------------------------------------ the RoaringBitmapArray


def serialize(rows: np.ndarray) -> bytes:
    """Row indexes as a DV: the magic number and the portable 64-bit Roaring bitmap. Every bucket
    from 0 to the last is written, empty ones included, as delta-spark writes them."""
    values = _sorted_unique(rows)
    if len(values) and int(values[-1]) >> 63:
        raise ValueError("row indexes must be below 2**63")
    highs = (values >> np.uint64(32)).astype(np.uint32)
    last = int(highs[-1]) if len(values) else -1
    parts = [struct.pack("<IQ", MAGIC, last + 1)]
    starts = np.searchsorted(highs, np.arange(last + 2, dtype=np.uint32))
    for key in range(last + 1):
        low = (values[starts[key]:starts[key + 1]] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        parts.append(struct.pack("<I", key) + _serialize32(low))
    return b"".join(parts)


def deserialize(data: bytes) -> np.ndarray:
    """The row indexes of a DV (magic number and portable 64-bit Roaring bitmap)."""
    if len(data) < 12:
        raise ValueError("a deletion vector needs at least 12 bytes")
    magic, buckets = struct.unpack_from("<IQ", data, 0)
    if magic != MAGIC:
        raise ValueError(f"deletion vector magic number {magic}, expected {MAGIC} (the portable format)")
    pos = 12
    out = []
    previous = -1
    for _ in range(buckets):
        (key,) = struct.unpack_from("<I", data, pos)
        if key <= previous:
            raise ValueError("deletion vector buckets are not in ascending order")
        previous = key
        low, pos = _deserialize32(data, pos + 4)
        out.append((np.uint64(key) << np.uint64(32)) | low.astype(np.uint64))
    if pos != len(data):
        raise ValueError(f"deletion vector has {len(data) - pos} bytes after its last bucket")
    return np.concatenate(out) if out else np.zeros(0, np.uint64)


def _serialize32(values: np.ndarray) -> bytes:
    """Sorted unique uint32 values as a portable 32-bit Roaring bitmap without run containers."""
    keys, starts = np.unique(values >> np.uint32(16), return_index=True)
    n = len(keys)
    bounds = list(starts) + [len(values)]
    containers = []
    for i in range(n):
        low = (values[bounds[i]:bounds[i + 1]] & np.uint32(0xFFFF)).astype("<u2")
        if len(low) <= _ARRAY_MAX:
            containers.append(low.tobytes())
        else:
            bits = np.zeros(65536, np.uint8)
            bits[low] = 1
            containers.append(np.packbits(bits, bitorder="little").tobytes())
    header = struct.pack("<II", _NO_RUNS, n)
    header += np.column_stack([keys.astype("<u2"), (np.diff(bounds) - 1).astype("<u2")]).astype("<u2").tobytes()
    offset = len(header) + 4 * n
    offsets = []
    for c in containers:
        offsets.append(offset)
        offset += len(c)
    return header + np.asarray(offsets, "<u4").tobytes() + b"".join(containers)


def _deserialize32(data: bytes, start: int) -> tuple[np.ndarray, int]:
    """A portable 32-bit Roaring bitmap at `start`: its values and where it ends."""
    (cookie,) = struct.unpack_from("<I", data, start)
    pos = start + 4
    if cookie == _NO_RUNS:
        (n,) = struct.unpack_from("<I", data, pos)
        pos += 4
        runs = np.zeros(n, bool)
        offsets = True
    elif cookie & 0xFFFF == _WITH_RUNS:
        n = (cookie >> 16) + 1
        flags = np.frombuffer(data, np.uint8, (n + 7) // 8, pos)
        runs = np.unpackbits(flags, bitorder="little")[:n].astype(bool)
        pos += (n + 7) // 8
        offsets = n >= 4
    else:
        raise ValueError(f"not a portable Roaring bitmap (cookie {cookie})")
    header = np.frombuffer(data, "<u2", 2 * n, pos).reshape(n, 2) if n else np.zeros((0, 2), "<u2")
    pos += 4 * n + (4 * n if offsets else 0)
    out = []
    for i in range(n):
        key, card = int(header[i, 0]), int(header[i, 1]) + 1
        if runs[i]:
            (nruns,) = struct.unpack_from("<H", data, pos)
            pairs = np.frombuffer(data, "<u2", 2 * nruns, pos + 2).reshape(nruns, 2).astype(np.uint32)
            low = _expand_runs(pairs[:, 0], pairs[:, 1])
            pos += 2 + 4 * nruns
        elif card <= _ARRAY_MAX:
            low = np.frombuffer(data, "<u2", card, pos).astype(np.uint32)
            pos += 2 * card
        else:
            bits = np.unpackbits(np.frombuffer(data, np.uint8, 8192, pos), bitorder="little")
            low = np.flatnonzero(bits).astype(np.uint32)
            pos += 8192
        if len(low) != card:
            raise ValueError(f"Roaring container {key} holds {len(low)} values, its header says {card}")
        out.append((np.uint32(key) << np.uint32(16)) | low)
    return (np.concatenate(out) if out else np.zeros(0, np.uint32)), pos


def _expand_runs(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The values of a run container's runs (start, length - 1), without a Python loop per run:
    delta-spark writes runs, and a container can hold thousands of them."""
    if len(starts) and int((starts + lengths).max()) > 0xFFFF:
        raise ValueError("a Roaring run goes past its container")
    counts = lengths.astype(np.int64) + 1
    # Value i of the output is its run's start plus its place in the run: i minus the run's first i.
    firsts = np.cumsum(counts) - counts
    return (np.repeat(starts.astype(np.int64) - firsts, counts) + np.arange(int(counts.sum()))).astype(np.uint32)


def _sorted_unique(rows: np.ndarray | Sequence[int]) -> np.ndarray:
    values = np.asarray(rows)
    if values.size == 0:
        return np.zeros(0, np.uint64)
    if values.dtype.kind not in "iu":
        raise ValueError(f"row indexes are integers, not {values.dtype}")
    if values.dtype.kind == "i" and values.min() < 0:
        raise ValueError("row indexes cannot be negative")
    return np.unique(values.astype(np.uint64))


# ------------------------------------------------------------------ Z85


def z85_encode(data: bytes) -> str:
    """Z85 (ZeroMQ's Base85), with Delta's padding: zero bytes up to a multiple of 4."""
    padded = data + b"\0" * (-len(data) % 4)
    out = []
    for (word,) in struct.iter_unpack(">I", padded):
        digits = []
        for _ in range(5):
            word, d = divmod(word, 85)
            digits.append(_Z85[d])
        out.append("".join(reversed(digits)))
    return "".join(out)


def z85_decode(text: str, size: int) -> bytes:
    """The first `size` bytes Z85 `text` encodes."""
    if len(text) % 5:
        raise ValueError(f"a Z85 string's length is a multiple of 5, not {len(text)}")
    words = []
    for i in range(0, len(text), 5):
        word = 0
        for ch in text[i:i + 5]:
            if ch not in _Z85_INDEX:
                raise ValueError(f"{ch!r} is not a Z85 character")
            word = word * 85 + _Z85_INDEX[ch]
        if word > 0xFFFFFFFF:
            raise ValueError(f"Z85 group {text[i:i + 5]!r} is out of range")
        words.append(struct.pack(">I", word))
    data = b"".join(words)
    if size > len(data):
        raise ValueError(f"Z85 string holds {len(data)} bytes, not {size}")
    return data[:size]
