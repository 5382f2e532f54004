"""Deletion vectors as PROTOCOL.md stores them: Z85, the portable Roaring bitmaps, DV files."""
from __future__ import annotations

import struct
import uuid
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiplake.errors import CorruptDeletionVectorError
from skiplake.log.deletion_vectors import (
    MAGIC,
    DeletionVector,
    deserialize,
    inline,
    read_deleted_rows,
    serialize,
    write_dv_file,
    z85_decode,
    z85_encode,
)
from tests.tiers import examples

# A DV file written by Databricks Runtime (delta-rs keeps it as test data, table-with-dv-small):
# version 1, size 36 (big-endian), magic, one bucket (key 0) holding an array container of rows 0
# and 9, CRC-32 (big-endian). Its descriptor, from that table's log:
DATABRICKS_FILE = bytes.fromhex(
    "01" "00000024" "d1d33964" "0100000000000000" "00000000" "3a30000001000000" "00000100" "10000000"
    "00000900" "2a671846")
DATABRICKS_DV = {"storageType": "u", "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA", "offset": 1, "sizeInBytes": 36,
                 "cardinality": 2}


def test_z85_matches_the_zeromq_specification():
    # ZeroMQ RFC 32's test vector.
    raw = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert z85_encode(raw) == "HelloWorld"
    assert z85_decode("HelloWorld", 8) == raw


@given(st.binary(max_size=64))
def test_z85_round_trips_with_delta_padding(data):
    text = z85_encode(data)
    assert len(text) == 5 * ((len(data) + 3) // 4)
    assert z85_decode(text, len(data)) == data


@pytest.mark.parametrize("bad", ["abcd", "abc~e", "#####"])
def test_z85_refuses_what_is_not_z85(bad):
    with pytest.raises(ValueError):
        z85_decode(bad, 4)


def test_uuid_paths_as_the_protocol_names_them(tmp_path):
    # PROTOCOL.md's example: prefix "ab", then the UUID in Z85.
    dv = DeletionVector("u", "ab^-aqEH.-t@S}K{vb[*k^", 10, 2, 4)
    assert dv.file_path("/t") == "/t/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    assert dv.unique_id == "uab^-aqEH.-t@S}K{vb[*k^@4"
    assert DeletionVector("i", "abcde", 4, 1).unique_id == "iabcde"
    assert DeletionVector.from_json(dv.to_json()) == dv


def test_a_dv_file_written_by_databricks_reads(tmp_path):
    dv = DeletionVector.from_json(DATABRICKS_DV)
    path = dv.file_path(str(tmp_path))
    assert path.endswith("deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin")
    with open(path, "wb") as f:
        f.write(DATABRICKS_FILE)
    assert read_deleted_rows(str(tmp_path), dv).tolist() == [0, 9]
    # This module writes the same DV byte for byte.
    assert serialize(np.array([0, 9])) == DATABRICKS_FILE[5:41]


def _with_runs() -> bytes:
    """PROTOCOL.md's run container example, {1..11, 20, 31..33}, framed by hand as a portable
    bitmap with the run cookie (one container, so no offset header)."""
    container = struct.pack("<H", 3) + struct.pack("<6H", 1, 10, 20, 0, 31, 2)
    bitmap = struct.pack("<I", 12347) + bytes([1]) + struct.pack("<HH", 0, 15 - 1) + container
    return struct.pack("<IQ", MAGIC, 1) + struct.pack("<I", 0) + bitmap


def test_run_containers_read():
    assert deserialize(_with_runs()).tolist() == list(range(1, 12)) + [20, 31, 32, 33]


def _run_bitmap(containers: dict[int, list[tuple[int, int]]]) -> bytes:
    """A DV of one bucket whose 32-bit bitmap holds only run containers: key -> (start, length - 1) runs."""
    keys = sorted(containers)
    n = len(keys)
    bodies = [struct.pack("<H", len(containers[k])) + b"".join(struct.pack("<HH", *r) for r in containers[k])
              for k in keys]
    header = struct.pack("<I", 12347 | (n - 1) << 16) + bytes([0xFF] * ((n + 7) // 8))
    header += b"".join(struct.pack("<HH", k, sum(length + 1 for _, length in containers[k]) - 1) for k in keys)
    if n >= 4:  # the offset header, as the portable format has it from four containers on
        offset = len(header) + 4 * n
        for body in bodies:
            header += struct.pack("<I", offset)
            offset += len(body)
    return struct.pack("<IQ", MAGIC, 1) + struct.pack("<I", 0) + header + b"".join(bodies)


@st.composite
def _run_containers(draw) -> dict[int, list[tuple[int, int]]]:
    out = {}
    for key in draw(st.lists(st.integers(0, 2 ** 16 - 1), min_size=1, max_size=6, unique=True)):
        cuts = sorted(draw(st.lists(st.integers(0, 2 ** 16 - 1), min_size=2, max_size=200, unique=True)))
        # Runs between every other pair of cut points: sorted, apart, inside the container.
        out[key] = [(a, b - a) for a, b in zip(cuts[::2], cuts[1::2])] or [(cuts[0], 0)]
    return out


@settings(max_examples=examples(60), deadline=None)
@given(_run_containers())
def test_run_containers_decode_as_their_runs_one_by_one(containers):
    # The loop over runs the decoder had, as the reference.
    expected = [key << 16 | v for key in sorted(containers) for start, length in containers[key]
                for v in range(start, start + length + 1)]
    assert deserialize(_run_bitmap(containers)).tolist() == expected


def test_a_run_past_its_container_is_refused():
    with pytest.raises(ValueError, match="past its container"):
        deserialize(_run_bitmap({0: [(65530, 10)]}))


rows = st.one_of(
    st.lists(st.integers(0, 2 ** 40), max_size=300),
    st.tuples(st.integers(0, 2 ** 33), st.integers(4000, 20000)).map(lambda t: list(range(t[0], t[0] + t[1]))),
    st.just([]),
    st.just([2 ** 32 - 1, 2 ** 32, 3 * 2 ** 32 + 7]),
)


@settings(max_examples=examples(60), deadline=None)
@given(rows)
def test_bitmaps_round_trip_through_files_and_the_log(tmp_path_factory, values):
    expected = sorted(set(values))
    assert deserialize(serialize(np.array(values, dtype=np.uint64))).tolist() == expected
    table = str(tmp_path_factory.mktemp("t"))
    [a, b] = write_dv_file(table, [np.array(values, dtype=np.uint64), np.array([5, 3, 5])], prefix="zz")
    assert a.cardinality == len(expected) and b.offset == a.offset + 8 + a.size_in_bytes
    assert read_deleted_rows(table, a).tolist() == expected
    assert read_deleted_rows(table, b).tolist() == [3, 5]
    small = inline(np.array(values[:20], dtype=np.uint64))
    assert read_deleted_rows(table, small).tolist() == sorted(set(values[:20]))


def test_a_damaged_dv_is_a_clear_error(tmp_path):
    [dv] = write_dv_file(str(tmp_path), [np.array([1, 2, 3])])
    path = dv.file_path(str(tmp_path))
    data = bytearray(open(path, "rb").read())
    data[-6] ^= 0xFF  # a bit of the bitmap
    open(path, "wb").write(bytes(data))
    with pytest.raises(CorruptDeletionVectorError, match="checksum"):
        read_deleted_rows(str(tmp_path), dv)
    two = inline(np.array([1, 2]))
    with pytest.raises(CorruptDeletionVectorError, match="holds 2 rows"):
        read_deleted_rows(str(tmp_path), DeletionVector("i", two.path_or_inline, two.size_in_bytes, 3))
    with pytest.raises(CorruptDeletionVectorError):  # a bitmap cut short
        read_deleted_rows(str(tmp_path), DeletionVector("i", two.path_or_inline, two.size_in_bytes - 4, 2))


def test_dv_files_are_never_overwritten(tmp_path, monkeypatch):
    fixed = uuid.UUID("d2c639aa-8816-431a-aaf6-d3fe2512ff61")
    monkeypatch.setattr(uuid, "uuid4", lambda: fixed)
    write_dv_file(str(tmp_path), [np.array([1])])
    with pytest.raises(FileExistsError):
        write_dv_file(str(tmp_path), [np.array([2])])


def test_crc_and_size_frame_the_magic_and_bitmap(tmp_path):
    [dv] = write_dv_file(str(tmp_path), [np.array([7])])
    raw = open(dv.file_path(str(tmp_path)), "rb").read()
    size = struct.unpack(">I", raw[1:5])[0]
    assert size == dv.size_in_bytes and raw[5:9] == struct.pack("<I", MAGIC)
    assert struct.unpack(">I", raw[5 + size:9 + size])[0] == zlib.crc32(raw[5:5 + size])


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.integers(1, 2 ** 40), min_size=1, max_size=128, unique=True))
def test_file_sizes_get_slots_of_their_own(sizes):
    from skiplake.spark.reads.deleted_rows import MAX_SLOTS, _slots
    values = np.array(sorted(sizes), np.int64)
    m = _slots(values)
    # A table of at most MAX_SLOTS slots is found for up to 128 sizes nearly always; when it is,
    # no two sizes share a slot.
    assert m is None or (len(values) <= m <= MAX_SLOTS and len(set((values % m).tolist())) == len(values))


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.integers(0, 20_000), max_size=500, unique=True))
def test_whole_file_bitmaps_set_the_bits_of_their_rows(rows):
    from skiplake.spark.reads.deleted_rows import _whole_bitmap
    words = _whole_bitmap(np.array(sorted(rows), np.uint64))
    assert len(words) == (max(rows) // 64 + 1 if rows else 0)
    assert [w * 64 + b for w, word in enumerate(words.tolist()) for b in range(64) if word >> b & 1] == sorted(rows)
