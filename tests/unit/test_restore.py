"""RESTORE's log side without Spark: which files come back, the protocol it keeps, its refusals,
and that it never rebases past a concurrent commit."""
from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import replace

import pytest

from skiplake.errors import ConcurrentWriteException, InvalidArgumentError, RestoreFilesMissingError
from skiplake.log.actions import Metadata, Protocol
from skiplake.log.features import merged_protocol, table_features
from skiplake.log.history import commits
from skiplake.log.snapshot import Snapshot
from skiplake.table_info import table_detail
from skiplake.txn import commit, create
from skiplake.txn.restore import plan_restore, restore
from tests.unit.logutil import SCHEMA, add


def _table(tmp_path, names_by_version: list[list[str]]) -> str:
    """A table whose version i (from 1) holds exactly the files names_by_version[i - 1]; every
    file it ever names exists on disk."""
    path = str(tmp_path / "t")
    snap = create(path, Metadata.new(SCHEMA, ["d"], {}))
    live: set[str] = set()
    for names in names_by_version:
        gone = sorted(live - set(names))
        actions = [add(n).remove(1) for n in gone] + [add(n) for n in names if n not in live]
        snap = Snapshot.load(path, commit(snap, actions, "WRITE").version)
        live = set(names)
    for names in names_by_version:
        for n in names:
            open(os.path.join(path, n), "wb").close()
    return path


def _live(path: str) -> set[str]:
    return set(Snapshot.load(path).files.column("path").to_pylist())


def test_restore_brings_back_the_files_of_the_version(tmp_path):
    path = _table(tmp_path, [["a"], ["a", "b"], ["c"]])
    result = restore(path, version=2)
    assert result.version == 4 and result.restored_version == 2
    assert _live(path) == {"a", "b"}
    assert (result.num_restored_files, result.num_removed_files) == (2, 1)
    assert (result.num_of_files_after_restore, result.table_size_after_restore) == (2, 200)
    assert (result.restored_files_size, result.removed_files_size) == (200, 100)
    info = commits(path, 1)[0].info
    assert info is not None and info.operation == "RESTORE"
    assert info.operationParameters == {"version": "2", "timestamp": "null"}   # JSON-encoded, as Delta writes
    assert info.operationMetrics == result.operation_metrics()
    assert info.operationMetrics["numRestoredFiles"] == "2" and info.isolationLevel == "Serializable"
    assert info.isBlindAppend is False


def test_restore_adds_with_data_change_and_removes_what_came_later(tmp_path):
    path = _table(tmp_path, [["a", "b"], ["b", "c"]])
    restore(path, version=1)
    storage = Snapshot.load(path).storage
    lines = [json.loads(x) for x in storage.read(f"{3:020d}.json").decode().splitlines()]
    adds = [x["add"] for x in lines if "add" in x]
    removes = [x["remove"] for x in lines if "remove" in x]
    assert [a["path"] for a in adds] == ["a"] and all(a["dataChange"] for a in adds)
    assert json.loads(adds[0]["stats"])["numRecords"] == 10  # the file's stats come back with it
    assert [r["path"] for r in removes] == ["c"] and removes[0]["dataChange"] is True
    assert any("metaData" in x for x in lines)


def test_restore_to_a_timestamp(tmp_path):
    path = _table(tmp_path, [["a"], ["b"]])
    ts = {c.version: c.timestamp_ms for c in commits(path)}
    when = dt.datetime.fromtimestamp(ts[1] / 1000, dt.timezone.utc)
    result = restore(path, timestamp=when)
    assert result.restored_version == 1 and _live(path) == {"a"}
    params = commits(path, 1)[0].info.operationParameters
    assert params["version"] == "null" and params["timestamp"] == str(when)


def test_restore_refuses_versions_not_older_than_the_latest(tmp_path):
    path = _table(tmp_path, [["a"], ["b"]])
    for bad in (2, 3, -1):
        with pytest.raises(InvalidArgumentError, match="older than the latest"):
            restore(path, version=bad)
    with pytest.raises(InvalidArgumentError, match="exactly one"):
        restore(path)
    with pytest.raises(InvalidArgumentError, match="exactly one"):
        restore(path, version=1, timestamp="2020-01-01 00:00:00")
    assert Snapshot.load(path).version == 2


def test_restore_refuses_when_files_are_gone_and_writes_nothing(tmp_path):
    path = _table(tmp_path, [["a", "b"], ["c"]])
    os.remove(os.path.join(path, "b"))
    with pytest.raises(RestoreFilesMissingError, match=r"version 1.*: b\b") as e:
        restore(path, version=1)
    assert e.value.missing == ["b"]
    assert Snapshot.load(path).version == 2 and _live(path) == {"c"}


def test_restore_fails_on_any_concurrent_commit(tmp_path):
    path = _table(tmp_path, [["a"], ["b"]])
    stale = Snapshot.load(path)
    commit(stale, [add("x")], "WRITE")   # a blind append lands first
    open(os.path.join(path, "x"), "wb").close()
    with pytest.raises(ConcurrentWriteException, match="concurrent WRITE committed version 3"):
        restore(path, version=1, latest=stale)
    assert Snapshot.load(path).version == 3


def test_restore_brings_back_metadata_and_never_downgrades_the_protocol(tmp_path):
    path = _table(tmp_path, [["a"]])
    snap = Snapshot.load(path)
    upgraded = Protocol(3, 7, ("deletionVectors",), ("appendOnly", "deletionVectors", "invariants"))
    md = Metadata(snap.metadata.id, SCHEMA.json_string(), ("d",), {"delta.enableDeletionVectors": "true"},
                  createdTime=snap.metadata.createdTime)
    commit(snap, [upgraded, md], "SET TBLPROPERTIES")
    restore(path, version=1)
    now = Snapshot.load(path)
    assert now.protocol == upgraded
    assert now.metadata.configuration == {} and now.metadata.id == snap.metadata.id


def test_plan_matches_files_by_path_and_deletion_vector(tmp_path):
    path = _table(tmp_path, [["a"]])
    snap = Snapshot.load(path)
    dv = {"storageType": "i", "pathOrInlineDv": "wi5b=000010000", "sizeInBytes": 20, "cardinality": 1}
    marked = replace(add("a"), deletionVector=dv)
    commit(snap, [add("a").remove(5), marked], "DELETE")
    plan = plan_restore(Snapshot.load(path), Snapshot.load(path, 1))
    assert [f.path for f in plan.removed] == ["a"] and plan.removed[0].deletionVector == dv
    assert [f.path for f in plan.restored] == ["a"] and plan.restored[0].deletionVector is None


@pytest.mark.parametrize("a, b, want", [
    (Protocol(1, 2), Protocol(1, 2), Protocol(1, 2)),
    (Protocol(1, 2), Protocol(1, 4), Protocol(1, 4)),
    (Protocol(2, 5), Protocol(1, 2), Protocol(2, 5)),
    (Protocol(1, 2), Protocol(3, 7, ("deletionVectors",), ("deletionVectors",)),
     Protocol(3, 7, ("deletionVectors",), ("appendOnly", "deletionVectors", "invariants"))),
    (Protocol(2, 5), Protocol(1, 7, None, ("appendOnly",)),
     Protocol(2, 7, None, ("appendOnly", "changeDataFeed", "checkConstraints", "columnMapping",
                           "generatedColumns", "invariants"))),
])
def test_merged_protocol_supports_both(a, b, want):
    assert merged_protocol(a, b) == want
    assert merged_protocol(b, a) == want


def test_detail_fields(tmp_path):
    path = _table(tmp_path, [["a", "b"]])
    d = table_detail(Snapshot.load(path))
    assert (d.format, d.location, d.num_files, d.size_in_bytes, d.version) == ("delta", path, 2, 200, 1)
    assert d.partition_columns == ["d"] and d.table_features == ["appendOnly", "invariants"]
    assert (d.min_reader_version, d.min_writer_version) == (1, 2)
    row = d.to_dict()
    assert set(row) >= {"format", "id", "name", "description", "location", "createdAt", "lastModified",
                        "partitionColumns", "clusteringColumns", "numFiles", "sizeInBytes", "properties",
                        "minReaderVersion", "minWriterVersion", "tableFeatures", "statistics"}
    assert row["statistics"] == {"numDeletionVectors": 0, "numRowsDeletedByDeletionVectors": 0}
    assert table_features(Protocol(3, 7, ("deletionVectors",), ("deletionVectors", "appendOnly"))) == [
        "appendOnly", "deletionVectors"]


def test_append_only_tables_refuse_removing_rows(tmp_path):
    path = str(tmp_path / "t")
    snap = create(path, Metadata.new(SCHEMA, ["d"], {"delta.appendOnly": "true"}))
    snap = Snapshot.load(path, commit(snap, [add("a")], "WRITE").version)
    snap = Snapshot.load(path, commit(snap, [add("b")], "WRITE").version)
    open(os.path.join(path, "a"), "wb").close()
    from skiplake.errors import AppendOnlyTableError
    with pytest.raises(AppendOnlyTableError, match="only allows appends"):
        commit(snap, [add("a").remove(5)], "DELETE")
    with pytest.raises(AppendOnlyTableError):
        restore(path, version=1)
    # compaction moves rows without changing them: allowed
    commit(snap, [add("a").remove(5, data_change=False), add("b").remove(5, data_change=False),
                  replace(add("c"), dataChange=False)], "OPTIMIZE")
    assert _live(path) == {"c"}
