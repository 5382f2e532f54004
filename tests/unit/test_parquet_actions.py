"""Checkpoint Parquet files are read row group by row group, each only for the actions it holds."""
from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skiplake.log.arrow_schema import CHECKPOINT_SCHEMA
from skiplake.log.parquet_actions import ActionReadError, read_actions


def _rows() -> list[list[dict]]:
    """Three row groups: the protocol and metaData; adds only; adds and removes mixed."""
    meta = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            {"metaData": {"id": "t", "schemaString": "{}", "partitionColumns": [], "configuration": [],
                          "format": {"provider": "parquet", "options": []}}}]
    adds = [{"add": {"path": f"a{i}", "size": i, "modificationTime": 0, "dataChange": True}} for i in range(5)]
    mixed = [{"add": {"path": "b0", "size": 1, "modificationTime": 0, "dataChange": True}},
             {"remove": {"path": "r0", "deletionTimestamp": 1, "dataChange": True}},
             {"txn": {"appId": "app", "version": 3}}]
    return [meta, adds, mixed]


def _file(statistics: bool) -> bytes:
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, CHECKPOINT_SCHEMA, write_statistics=statistics) as writer:
        for group in _rows():
            writer.write_table(pa.Table.from_pylist(group, schema=CHECKPOINT_SCHEMA))
    return sink.getvalue()


def _non_null(column: pa.ChunkedArray | None) -> list:
    return [] if column is None else column.filter(column.is_valid()).to_pylist()


@pytest.mark.parametrize("statistics", [True, False])
def test_actions_read_equal_a_whole_read(statistics):
    data = _file(statistics)
    (got,) = read_actions([data], [pq.ParquetFile(pa.BufferReader(data))], lambda s: list(s.names))
    whole = pq.read_table(pa.BufferReader(data))
    for action in CHECKPOINT_SCHEMA.names:
        assert _non_null(got.column(action)) == _non_null(whole.column(action)), action


def test_row_groups_are_read_only_for_the_actions_they_hold():
    data = _file(statistics=True)
    (got,) = read_actions([data], [pq.ParquetFile(pa.BufferReader(data))], lambda s: list(s.names))
    assert [len(c) for c in got.chunks["add"]] == [5, 3]      # groups 2 and 3
    assert [len(c) for c in got.chunks["remove"]] == [3]      # group 3 only
    assert [len(c) for c in got.chunks["metaData"]] == [2]    # group 1 only
    assert "domainMetadata" not in got.chunks                 # no group holds one
    assert got.column("domainMetadata") is None


def test_without_statistics_every_group_is_read():
    data = _file(statistics=False)
    (got,) = read_actions([data], [pq.ParquetFile(pa.BufferReader(data))], lambda s: list(s.names))
    assert [len(c) for c in got.chunks["remove"]] == [2, 5, 3]


def test_columns_and_actions_select_what_is_read():
    data = _file(statistics=True)
    (got,) = read_actions([data], [pq.ParquetFile(pa.BufferReader(data))],
                          lambda s: ["add.path", "remove"], frozenset({"add"}))
    assert set(got.chunks) == {"add"}
    assert _non_null(got.column("add")) == [{"path": f"a{i}"} for i in range(5)] + [{"path": "b0"}]


def test_an_unreadable_row_group_names_its_file_and_group():
    data = bytearray(_file(statistics=True))
    meta = pq.ParquetFile(pa.BufferReader(bytes(data))).metadata
    start = meta.row_group(1).column(3).data_page_offset      # add.path of the adds' group
    data[start:start + 64] = b"\xff" * 64
    broken = bytes(data)
    with pytest.raises(ActionReadError) as e:
        read_actions([_file(True), broken], [pq.ParquetFile(pa.BufferReader(d)) for d in (_file(True), broken)],
                     lambda s: list(s.names))
    assert e.value.index == 1 and e.value.group == 1
