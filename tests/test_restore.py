"""RESTORE and DESCRIBE DETAIL through Spark, with delta-rs's RESTORE as the reference."""
from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pytest

from skiplake.errors import InvalidArgumentError, RestoreFilesMissingError
from skiplake.log.snapshot import Snapshot
from tests.test_table import SCHEMA, make_rows, rows

pytestmark = pytest.mark.spark

deltalake = pytest.importorskip("deltalake")


def _files(path: str) -> set[tuple[str, str | None]]:
    snap = Snapshot.load(path)
    dvs = snap.files.column("deletionVector").to_pylist()
    return {(p, None if d is None else d["pathOrInlineDv"]) for p, d in zip(snap.files.column("path").to_pylist(), dvs)}


def _history_of_changes(lake, spark, name: str, properties: dict[str, str] | None = None):
    t = lake.create_table(name, SCHEMA, partition_by=["d"], properties=properties)
    t.append(make_rows(spark, 200).repartition(2))                      # 1
    t.delete("qty < 20")                                               # 2
    t.update("cat = 'c1'", {"qty": "qty + 1000"})                     # 3
    t.append(make_rows(spark, 50, start=500), merge_schema=False)     # 4
    t.overwrite(make_rows(spark, 30, start=900).filter("d = DATE'2001-01-02'"), where="d = DATE'2001-01-02'")  # 5
    return t


@pytest.mark.parametrize("dv", [False, True], ids=["rewrite", "deletion-vectors"])
def test_restore_matches_delta_rs_restore(lake, spark, dv):
    props = {"delta.enableDeletionVectors": "true"} if dv else None
    t = _history_of_changes(lake, spark, "ours", props)
    twin = os.path.join(lake.root, "twin")
    shutil.copytree(t.path, twin)
    for target in (3, 1):
        expected = rows(t.read(version=target))
        result = t.restore(version=target)
        assert result.restored_version == target and t.version == result.version
        assert rows(t.read()) == expected
        theirs = deltalake.DeltaTable(twin)
        metrics = theirs.restore(target)
        assert _files(t.path) == _files(twin)
        assert result.num_restored_files == metrics["numRestoredFile"]
        assert result.num_removed_files == metrics["numRemovedFile"]
        # delta-rs reads what skiplake restored, with the same rows (deletion vectors applied)
        got = pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(t.path)).execute(
            "SELECT count(*) AS n, sum(id) AS s FROM t").read_all()).to_pylist()[0]
        assert (got["n"], got["s"]) == (len(expected), sum(r[0] for r in expected))
    history = t.history()
    assert [h["operation"] for h in history[:2]] == ["RESTORE", "RESTORE"]
    assert history[0]["operationMetrics"]["numRestoredFiles"] == str(result.num_restored_files)


def test_restore_brings_back_the_schema_and_properties(lake, spark):
    t = lake.create_table("evolving", "id long, v int")
    t.append(spark.sql("SELECT id, CAST(id AS INT) v FROM range(10)"))                     # 1
    t.append(spark.sql("SELECT id, CAST(id AS INT) v, 'x' AS extra FROM range(10, 20)"), merge_schema=True)  # 2
    t.set_properties({"delta.isolationLevel": "Serializable"})                            # 3
    t.restore(version=1)
    assert t.schema.fieldNames() == ["id", "v"] and "delta.isolationLevel" not in t.properties
    assert rows(t.read()) == [(i, i) for i in range(10)]
    t.append(spark.sql("SELECT id, CAST(id AS INT) v FROM range(20, 25)"))                # writes go on
    assert t.read().count() == 15


def test_restore_by_timestamp_and_refusals(lake, spark):
    t = lake.create_table("stamps", "id long")
    t.append(spark.range(5))
    when = t.history()[0]["timestamp"]
    t.append(spark.range(5, 8))
    result = t.restore(timestamp=_iso(when))
    assert result.restored_version == 1 and t.read().count() == 5
    with pytest.raises(InvalidArgumentError, match="older than the latest"):
        t.restore(version=t.version)
    pinned = lake.table("stamps", version=1)
    with pytest.raises(InvalidArgumentError, match="read-only"):
        pinned.restore(version=0)


def test_restore_after_vacuum_names_missing_files_and_changes_nothing(lake, spark):
    t = lake.create_table("vacuumed", "id long")
    t.append(spark.range(10).repartition(2))
    gone = {f.path for f in t.snapshot.add_files}
    t.overwrite(spark.range(100, 105))
    t.vacuum(retention_hours=0, force=True)
    version, live = t.version, _files(t.path)
    with pytest.raises(RestoreFilesMissingError) as e:
        t.restore(version=1)
    assert set(e.value.missing) == gone and all(p in str(e.value) for p in gone)
    assert Snapshot.load(t.path).version == version and _files(t.path) == live


def test_detail(lake, spark):
    t = lake.create_table("detailed", SCHEMA, partition_by=["d"], properties={"delta.enableDeletionVectors": "true"},
                          description="sales by day")
    t.append(make_rows(spark, 120).repartition(1))
    t.delete("id % 10 = 0")
    d = t.detail()
    snap = Snapshot.load(t.path)
    assert (d.name, d.description, d.location, d.version) == ("detailed", "sales by day", t.path, t.version)
    assert d.num_files == snap.num_files and d.size_in_bytes == snap.size_bytes
    assert d.partition_columns == ["d"] and d.properties["delta.enableDeletionVectors"] == "true"
    assert (d.min_reader_version, d.min_writer_version) == (3, 7) and "deletionVectors" in d.table_features
    assert d.num_deletion_vectors > 0 and d.num_rows_deleted_by_deletion_vectors == 12
    assert d.to_dict()["statistics"]["numRowsDeletedByDeletionVectors"] == 12


def _iso(ms_or_text) -> str:
    import datetime as dt
    if isinstance(ms_or_text, str):
        return ms_or_text
    return dt.datetime.fromtimestamp(ms_or_text / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


def test_append_only_table_refuses_delete_update_and_restore(lake, spark):
    from skiplake.errors import AppendOnlyTableError
    t = lake.create_table("ledger", "id long", properties={"delta.appendOnly": "true"})
    t.append(spark.range(5))
    t.append(spark.range(5, 8))
    version = t.version
    for change in (lambda: t.delete("id = 1"), lambda: t.update("id = 1", {"id": "id + 100"}),
                   lambda: t.restore(version=1)):
        with pytest.raises(AppendOnlyTableError, match="delta.appendOnly"):
            change()
    assert Snapshot.load(t.path).version == version and t.read().count() == 8
