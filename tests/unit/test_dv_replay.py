"""Replaying logs whose files carry deletion vectors: a logical file is (path, DV id)."""
from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq

from skiplake.log.actions import AddFile, CommitInfo, Metadata, Protocol, RemoveFile, encode_commit
from skiplake.log.checkpoint import write_checkpoint
from skiplake.log.snapshot import LOG_DIR, Snapshot, checkpoint_name, commit_name, log_storage
from tests.unit.logutil import SCHEMA

DV_PROTOCOL = Protocol(3, 7, ("deletionVectors",), ("appendOnly", "invariants", "deletionVectors"))


def _dv(name: str, cardinality: int) -> dict:
    return {"storageType": "u", "pathOrInlineDv": name.ljust(20, "0"), "offset": 1, "sizeInBytes": 34,
            "cardinality": cardinality}


def _add(path: str, dv: dict | None = None) -> AddFile:
    return AddFile(path, {"d": "2001-01-01"}, 100, 1, True, json.dumps({"numRecords": 10}), None, dv)


def _write(table: str, version: int, actions: list) -> None:
    os.makedirs(os.path.join(table, LOG_DIR), exist_ok=True)
    info = CommitInfo(1_000 + version, "TEST")
    with open(os.path.join(table, LOG_DIR, commit_name(version)), "wb") as f:
        f.write(encode_commit([info, *actions]))


def _live(snapshot: Snapshot) -> dict[str, dict | None]:
    return {a.path: a.deletionVector for a in snapshot.add_files}


def test_a_dv_delete_replaces_the_file_whatever_the_order_of_its_actions(tmp_path):
    table = str(tmp_path)
    _write(table, 0, [DV_PROTOCOL, Metadata.new(SCHEMA, ["d"], {}), _add("a.parquet"), _add("b.parquet")])
    # delta-spark writes the new (path, DV) add before the old one's remove: keyed by path alone,
    # the remove would drop the file.
    old_a = _add("a.parquet")
    _write(table, 1, [_add("a.parquet", _dv("one", 2)), old_a.remove(5)])
    _write(table, 2, [_add("a.parquet", _dv("two", 3)), _add("a.parquet", _dv("one", 2)).remove(6),
                      _add("b.parquet").remove(6), _add("b.parquet", _dv("bee", 1))])
    assert _live(Snapshot.load(table, 0)) == {"a.parquet": None, "b.parquet": None}
    assert _live(Snapshot.load(table, 1)) == {"a.parquet": _dv("one", 2), "b.parquet": None}
    latest = Snapshot.load(table)
    assert _live(latest) == {"a.parquet": _dv("two", 3), "b.parquet": _dv("bee", 1)}
    assert latest.num_files == 2
    tomb = {(r.path, (r.deletionVector or {}).get("pathOrInlineDv")) for r in latest.tombstone_list}
    assert tomb == {("a.parquet", None), ("a.parquet", _dv("one", 2)["pathOrInlineDv"]), ("b.parquet", None)}


def test_checkpoints_keep_deletion_vectors_and_replay_continues_from_them(tmp_path):
    table = str(tmp_path)
    _write(table, 0, [DV_PROTOCOL, Metadata.new(SCHEMA, ["d"], {}), _add("a.parquet"), _add("b.parquet")])
    _write(table, 1, [_add("a.parquet", _dv("one", 2)), _add("a.parquet").remove(5)])
    assert write_checkpoint(log_storage(table), Snapshot.load(table, 1))
    os.remove(os.path.join(table, LOG_DIR, commit_name(0)))  # only the checkpoint rebuilds version 1 now
    _write(table, 2, [_add("a.parquet", _dv("two", 3)), _add("a.parquet", _dv("one", 2)).remove(6)])
    assert _live(Snapshot.load(table, 1)) == {"a.parquet": _dv("one", 2), "b.parquet": None}
    assert _live(Snapshot.load(table)) == {"a.parquet": _dv("two", 3), "b.parquet": None}
    written = pq.read_table(os.path.join(table, LOG_DIR, checkpoint_name(1)))
    adds = [a for a in written.column("add").to_pylist() if a is not None]
    assert {a["path"]: a["deletionVector"] for a in adds}["a.parquet"] == _dv("one", 2)


def test_delta_sparks_checkpoint_struct_with_max_row_index_is_read(tmp_path):
    # delta-spark's checkpoints add maxRowIndex (always null) to the descriptor struct.
    table = str(tmp_path)
    _write(table, 0, [DV_PROTOCOL, Metadata.new(SCHEMA, ["d"], {}), _add("a.parquet", _dv("one", 2))])
    snapshot = Snapshot.load(table)
    write_checkpoint(log_storage(table), snapshot)
    path = os.path.join(table, LOG_DIR, checkpoint_name(0))
    cp = pq.read_table(path)
    add = cp.column("add").combine_chunks()
    dv = add.field("deletionVector")
    wide = pa.StructArray.from_arrays([*dv.flatten(), pa.nulls(len(dv), pa.int64())],
                                      names=[*(f.name for f in dv.type), "maxRowIndex"], mask=dv.is_null())
    children = [wide if f.name == "deletionVector" else add.field(f.name) for f in add.type]
    new_add = pa.StructArray.from_arrays(children, names=[f.name for f in add.type], mask=add.is_null())
    pq.write_table(cp.set_column(cp.schema.get_field_index("add"), "add", new_add), path)
    os.remove(os.path.join(table, LOG_DIR, commit_name(0)))
    assert _live(Snapshot.load(table)) == {"a.parquet": _dv("one", 2)}


def test_removes_of_other_dvs_of_a_path_leave_the_live_one(tmp_path):
    # A remove of (path, DV x) where the live file is (path, DV y) removes nothing live.
    table = str(tmp_path)
    _write(table, 0, [DV_PROTOCOL, Metadata.new(SCHEMA, ["d"], {}), _add("a.parquet", _dv("one", 2))])
    _write(table, 1, [RemoveFile("a.parquet", 5, True, True, {"d": "2001-01-01"}, 100, None, _dv("zzz", 1))])
    assert _live(Snapshot.load(table)) == {"a.parquet": _dv("one", 2)}


def test_other_reader_features_are_refused_by_name(tmp_path):
    import pytest

    from skiplake.errors import ProtocolNotSupportedError
    from skiplake.log.snapshot import check_writable
    table = str(tmp_path)
    odd = Protocol(3, 7, ("deletionVectors", "columnMapping", "rowTracking"),
                   ("deletionVectors", "columnMapping", "rowTracking"))
    _write(table, 0, [odd, Metadata.new(SCHEMA, ["d"], {})])
    with pytest.raises(ProtocolNotSupportedError, match="rowTracking"):
        Snapshot.load(table)
    with pytest.raises(ProtocolNotSupportedError, match="column mapping"):
        check_writable(table, Protocol(2, 5))
    check_writable(table, DV_PROTOCOL)  # deletion vectors are written
