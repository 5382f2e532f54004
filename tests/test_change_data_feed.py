"""The change data feed: what DELETE, UPDATE, MERGE and overwrites record, and `t.changes()`.

Each test replays the feed against the table itself: the rows inserted minus the rows deleted
(update images included) at every version must be the table's rows at that version. The same
writes read by delta-spark's `table_changes` are in tests/test_delta_spark_reads.py.
"""
from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from skiplake.errors import ChangeDataNotRecordedError, FilesVacuumedError, SchemaMismatchError, VersionNotFoundError
from skiplake.log.actions import AddCDCFile
from skiplake.log.snapshot import log_storage, read_commit

pytestmark = pytest.mark.spark

SCHEMA = "id long, part string, qty int"
CDF = {"delta.enableChangeDataFeed": "true"}
DV = {**CDF, "delta.enableDeletionVectors": "true"}
MAPPED = {**DV, "delta.columnMapping.mode": "name"}


def _rows(spark, lo: int, hi: int):
    return spark.sql(f"SELECT id, concat('p', CAST(id % 3 AS STRING)) AS part, CAST(id % 10 AS INT) AS qty "
                     f"FROM range({lo}, {hi})")


def _table_rows(t, version: int) -> Counter:
    return Counter(tuple(r) for r in t.read(version=version).select("id", "part", "qty").collect())


def _check_replay(t) -> None:
    """The table's rows at every version, rebuilt from its change feed alone (one read of it)."""
    changes = sorted(t.changes(0, t.version).collect(), key=lambda r: r["_commit_version"])
    rows: Counter = Counter()
    at = 0
    for v in range(t.version + 1):
        while at < len(changes) and changes[at]["_commit_version"] == v:
            r = changes[at]
            key = (r["id"], r["part"], r["qty"])
            rows[key] += 1 if r["_change_type"] in ("insert", "update_postimage") else -1
            assert rows[key] >= 0, f"the feed deletes {key} at version {v}, which is not there"
            at += 1
        assert +rows == _table_rows(t, v), f"version {v}"


def _change_files(t, version: int) -> list[AddCDCFile]:
    return [a for a in read_commit(log_storage(t.path), version) if isinstance(a, AddCDCFile)]


# The gate: the plain feed unpartitioned, and partitioned with deletion vectors and column mapping.
@pytest.mark.parametrize("properties,partition_by", [
    pytest.param(CDF, None, id="cdf"),
    pytest.param(CDF, ["part"], id="cdf-partitioned", marks=pytest.mark.slow),
    pytest.param(DV, ["part"], id="cdf+dv-partitioned", marks=pytest.mark.slow),
    pytest.param(MAPPED, ["part"], id="cdf+dv+column-mapping")])
def test_dml_changes_replay_to_the_table(lake, spark, properties, partition_by):
    t = lake.create_table("t", SCHEMA, partition_by=partition_by, properties=properties)
    t.append(_rows(spark, 0, 60).repartition(3))                          # v1
    t.delete("id % 7 = 0")                                                 # v2 (few rows per file)
    t.update("qty < 3", {"qty": "qty + 100"})                              # v3
    t.delete("id >= 50")                                                   # v4 (most of a file)
    src = _rows(spark, 40, 80).selectExpr("id", "part", "CAST(qty * 2 AS INT) AS qty")
    (t.merge(src, "target.id = source.id").when_matched_update_all()       # v5
     .when_not_matched_insert_all().execute())
    t.overwrite(_rows(spark, 1000, 1010), where="id >= 70")               # v6 (replaceWhere)
    t.delete("part = 'p1'")                                               # v7
    t.update(None, {"qty": "qty - 1"})                                     # v8
    _check_replay(t)
    changes = t.changes(3, 3).collect()
    kinds = Counter(r["_change_type"] for r in changes)
    updated = _table_rows(t, 2) - _table_rows(t, 3)
    assert kinds == {"update_preimage": sum(updated.values()), "update_postimage": sum(updated.values())}
    assert {r["_commit_version"] for r in changes} == {3}
    # UPDATE and MERGE write change files; a DELETE by deletion vectors need not (the new DV says which rows).
    assert _change_files(t, 3) and _change_files(t, 5)
    assert not _change_files(t, 1)


def test_changes_by_timestamp_and_columns(lake, spark):
    t = lake.create_table("t", SCHEMA, properties=CDF)
    t.append(_rows(spark, 0, 10))
    t.delete("id < 3")
    df = t.changes(starting_version=1)
    assert df.columns == ["id", "part", "qty", "_change_type", "_commit_version", "_commit_timestamp"]
    assert dict(df.dtypes)["_commit_timestamp"] == "timestamp" and dict(df.dtypes)["_commit_version"] == "bigint"
    stamps = {r["_commit_version"]: r["_commit_timestamp"] for r in df.collect()}
    assert stamps[1] < stamps[2]
    by_time = t.changes(starting_timestamp=stamps[2].isoformat(), ending_timestamp=stamps[2].isoformat()).collect()
    assert {r["_commit_version"] for r in by_time} == {2} and len(by_time) == 3
    with pytest.raises(VersionNotFoundError):
        t.changes(5)


def test_feed_turned_on_later_and_reserved_columns(lake, spark):
    t = lake.create_table("t", SCHEMA)
    t.append(_rows(spark, 0, 10))                                     # v1, no change data
    t.set_properties(CDF)                                             # v2
    assert "changeDataFeed" in (t.snapshot.protocol.writerFeatures or ())
    assert t.snapshot.protocol.minReaderVersion == 1
    t.update("id = 1", {"qty": "0"})                                  # v3
    assert {r["_change_type"] for r in t.changes(2).collect()} == {"update_preimage", "update_postimage"}
    with pytest.raises(ChangeDataNotRecordedError, match="version 1"):
        t.changes(0)
    with pytest.raises(SchemaMismatchError, match="_change_type"):
        lake.create_table("bad", "id long, _change_type string", properties=CDF)


def test_deletion_vectors_and_feed_protocol(lake, spark):
    t = lake.create_table("t", SCHEMA, properties=DV)
    p = t.snapshot.protocol
    assert (p.minReaderVersion, p.minWriterVersion) == (3, 7)
    assert {"deletionVectors", "changeDataFeed"} <= set(p.writerFeatures or ())
    assert "changeDataFeed" not in (p.readerFeatures or ())


def test_change_files_survive_until_vacuum(lake, spark):
    t = lake.create_table("t", SCHEMA, properties=CDF)
    t.append(_rows(spark, 0, 20))
    t.update("id < 5", {"qty": "-1"})
    files = _change_files(t, 2)
    assert files and all(f.path.startswith("_change_data/") for f in files)
    assert t.vacuum(dry_run=True).files == []
    result = t.vacuum(retention_hours=0, force=True)
    assert {f.path for f in files} <= set(result.files)
    with pytest.raises(FilesVacuumedError, match="version 2"):
        t.changes(2, 2)


@pytest.mark.parametrize("properties", [CDF, DV], ids=["cdf", "cdf+dv"])
def test_delta_rs_reads_the_feed(lake, spark, properties):
    """delta-rs's load_cdf gives skiplake's answer over skiplake's writes."""
    deltalake = pytest.importorskip("deltalake")
    t = lake.create_table("t", SCHEMA, partition_by=["part"], properties=properties)
    t.append(_rows(spark, 0, 40).repartition(2))
    t.delete("id % 7 = 0")
    t.update("qty < 3", {"qty": "qty + 100"})
    src = _rows(spark, 30, 50).selectExpr("id", "part", "CAST(qty * 2 AS INT) AS qty")
    t.merge(src, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all().execute()
    columns = ["id", "part", "qty", "_change_type", "_commit_version"]
    ours = Counter(tuple(r) for r in t.changes(0).select(*columns).collect())
    theirs = pa.table(deltalake.DeltaTable(t.path).load_cdf(starting_version=0).read_all()).select(columns).to_pylist()
    assert Counter(tuple(r[c] for c in columns) for r in theirs) == ours
