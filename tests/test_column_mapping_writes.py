"""Tables with column mapping that skiplake creates and changes: every write under physical names.

Delta's column mapping (PROTOCOL.md) keeps logical names for users and physical ones in files,
partition values and stats. These tests read the log and the Parquet files themselves, so a
write that put a logical name where a physical one belongs fails here, not only in a peer.
(delta-spark reads such a table in tests/test_delta_spark_reads.py.)
"""
from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest

from skiplake.errors import ConcurrentAppendException, InvalidArgumentError
from skiplake.log.actions import AddFile, RemoveFile
from skiplake.log.column_mapping import ID, MAX_COLUMN_ID, PHYSICAL_NAME
from skiplake.log.snapshot import log_storage, read_commit
from skiplake.spark.dml import dml_jobs as dml

pytestmark = [pytest.mark.spark, pytest.mark.connect]

DV = {"delta.enableDeletionVectors": "true"}


def physical(t) -> dict[str, str]:
    return {f.name: f.metadata[PHYSICAL_NAME] for f in t.snapshot.schema.fields}


def logged(t, version: int | None = None) -> list:
    return read_commit(log_storage(t.path), t.version if version is None else version)


def assert_physical_keys(t, actions) -> None:
    """Every add and remove keys partition values, and every add its stats, by physical names."""
    phys = set(physical(t).values())
    parts = {physical(t)[c] for c in t.partition_by}
    for a in actions:
        if isinstance(a, (AddFile, RemoveFile)):
            assert set(a.partitionValues) == parts, a
        if isinstance(a, AddFile) and a.stats:
            stats = json.loads(a.stats)
            assert set(stats.get("minValues", {})) <= phys and stats.get("minValues"), a.stats


def ids_of(t, where: str | None = None) -> list[int]:
    return sorted(r.id for r in t.read(where).select("id").collect())


@pytest.fixture(params=["name", "id"])
def mapped(request, lake, spark):
    t = lake.create_table("cm", "id long, g int, s string, st struct<a: int, b: string>", partition_by=["g"],
                          properties={"delta.columnMapping.mode": request.param})
    t.append(spark.sql("SELECT id, CAST(id % 2 AS INT) AS g, concat('s', id) AS s, "
                       "named_struct('a', CAST(id % 7 AS INT), 'b', concat('b', id)) AS st FROM range(0, 400)")
             .repartition(4))
    return t


def test_create_gives_every_field_an_id_and_a_physical_name(mapped):
    snap = mapped.snapshot
    assert snap.column_mapping == mapped.properties["delta.columnMapping.mode"]
    assert snap.protocol.minReaderVersion == 3 and snap.protocol.minWriterVersion == 7
    assert "columnMapping" in snap.protocol.readerFeatures and "columnMapping" in snap.protocol.writerFeatures
    ids = [f.metadata[ID] for f in snap.schema.fields]
    nested = snap.schema.field("st").type["fields"]
    ids += [c["metadata"][ID] for c in nested]
    assert sorted(ids) == list(range(1, 7)) and int(mapped.properties[MAX_COLUMN_ID]) == 6
    assert all(p.startswith("col-") for p in physical(mapped).values())
    # The files name columns physically (nested ones too) and carry the ids as Parquet field ids.
    f = snap.add_files[0]
    schema = pq.read_schema(os.path.join(mapped.path, f.path))
    phys = physical(mapped)
    assert set(schema.names) == {phys["id"], phys["s"], phys["st"]}
    assert schema.field(phys["id"]).metadata[b"PARQUET:field_id"] == str(snap.schema.field("id").metadata[ID]).encode()
    assert [c["metadata"][PHYSICAL_NAME] for c in nested] == [schema.field(phys["st"]).type[i].name for i in range(2)]
    assert_physical_keys(mapped, logged(mapped))
    assert ids_of(mapped, "st.a = 3 AND g = 1") == [i for i in range(400) if i % 7 == 3 and i % 2 == 1]


# The gate's Spark Connect pass reruns the cases with deletion vectors (their writes take the
# most paths); the full tier's, all four.
@pytest.mark.parametrize("deletion_vectors", [False, pytest.param(True, marks=pytest.mark.both_modes)])
def test_dml_and_optimize_log_physical_names(mapped, spark, deletion_vectors):
    if deletion_vectors:
        mapped.set_properties(DV)
        assert mapped.snapshot.column_mapping != "none"
    expected = {i: f"s{i}" for i in range(400)}
    mapped.delete("id % 10 = 1")
    assert_physical_keys(mapped, logged(mapped))
    assert any(isinstance(a, AddFile) and a.deletionVector for a in logged(mapped)) == deletion_vectors
    expected = {i: v for i, v in expected.items() if i % 10 != 1}
    mapped.update("id % 10 = 2", {"s": "upper(s)"})
    assert_physical_keys(mapped, logged(mapped))
    expected.update({i: f"S{i}" for i in expected if i % 10 == 2})
    src = spark.sql("SELECT id, CAST(id % 2 AS INT) AS g, 'm' AS s, named_struct('a', 0, 'b', 'm') AS st "
                    "FROM range(395, 405)")
    mapped.merge(src, "target.id = source.id", when_matched_update={"s": "source.s"}, when_not_matched_insert="*")
    assert_physical_keys(mapped, logged(mapped))
    expected.update({i: "m" for i in range(395, 405) if i in expected or i >= 400})
    # Stats still skip by the logical names (the re-adds' and new files' stats are kept physical).
    plan = mapped.scan("id >= 400")
    assert 0 < plan.report.files_selected < plan.report.files_total
    result = mapped.optimize()
    assert result.files_removed > 0
    assert_physical_keys(mapped, logged(mapped))
    assert not any(f.deletionVector for f in mapped.snapshot.add_files)
    assert {r.id: r.s for r in mapped.read().collect()} == expected
    plan = mapped.scan("g = 1")
    assert plan.report.files_selected < plan.report.files_total
    # Z-order clusters by logical names and writes physical ones, with stats that skip.
    mapped.optimize(zorder_by=["id"], target_file_size=2_000)
    assert_physical_keys(mapped, logged(mapped))
    assert {r.id: r.s for r in mapped.read().collect()} == expected
    plan = mapped.scan("id < 50")
    assert plan.report.files_selected < plan.report.files_total


def test_rename_and_drop_columns_change_only_the_metadata(mapped, spark):
    before = {r.id: (r.s, r.st.a) for r in mapped.read().collect()}
    files = {f.path for f in mapped.snapshot.add_files}
    phys = physical(mapped)
    mapped.rename_column("s", "label")
    mapped.rename_column("g", "grp")   # a partition column
    assert mapped.partition_by == ["grp"] and mapped.read().columns == ["id", "grp", "label", "st"]
    assert physical(mapped)["label"] == phys["s"]
    assert {r.id: (r.label, r.st.a) for r in mapped.read().collect()} == before
    assert ids_of(mapped, "label = 's7' AND grp = 1") == [7]
    plan = mapped.scan("id < 50")
    assert plan.report.files_selected <= plan.report.files_total
    mapped.drop_columns("st")
    assert mapped.read().columns == ["id", "grp", "label"]
    assert {f.path for f in mapped.snapshot.add_files} == files   # no file rewritten
    assert [a for a in logged(mapped) if isinstance(a, (AddFile, RemoveFile))] == []
    # A new column with the dropped one's name is a new column (its own id and physical name).
    mapped.append(spark.sql("SELECT 1000L AS id, 1 AS grp, 'new' AS label, 'x' AS st"), merge_schema=True)
    st = mapped.snapshot.schema.field("st")
    assert st.metadata[ID] == 7 and st.metadata[PHYSICAL_NAME] != phys["st"] and mapped.properties[MAX_COLUMN_ID] == "7"
    assert [(r.id, r.st) for r in mapped.read().collect() if r.st is not None] == [(1000, "x")]
    assert_physical_keys(mapped, logged(mapped))


def test_schema_changes_that_are_refused(mapped, lake, spark):
    version = mapped.version
    with pytest.raises(InvalidArgumentError, match="partition column"):
        mapped.drop_columns("g")
    with pytest.raises(InvalidArgumentError, match="already has a column"):
        mapped.rename_column("s", "ID")
    with pytest.raises(InvalidArgumentError, match="no column 'nope'"):
        mapped.rename_column("nope", "x")
    with pytest.raises(InvalidArgumentError, match="cannot change"):
        mapped.set_properties({"delta.columnMapping.mode": "none"})
    assert mapped.refresh().version == version
    plain = lake.create_table("plain", "id long, s string")
    with pytest.raises(InvalidArgumentError, match="needs column mapping"):
        plain.rename_column("s", "t")
    with pytest.raises(InvalidArgumentError, match="'id' is set when a table is created"):
        plain.set_properties({"delta.columnMapping.mode": "id"})
    with pytest.raises(InvalidArgumentError, match="expected one of"):
        lake.create_table("bad", "id long", properties={"delta.columnMapping.mode": "names"})
    from skiplake import BucketSpec
    with pytest.raises(InvalidArgumentError, match="bucketed table cannot take column mapping"):
        lake.create_table("bucketed", "id long, s string", bucket_by=BucketSpec(4, ["id"]),
                          properties={"delta.columnMapping.mode": "name"})


def test_name_mode_on_an_existing_table_keeps_its_files(lake, spark):
    t = lake.create_table("old", "id long, s string", partition_by=None)
    t.append(spark.sql("SELECT id, concat('s', id) AS s FROM range(0, 100)").repartition(2))
    before = {r.id: r.s for r in t.read().collect()}
    t.set_properties({"delta.columnMapping.mode": "name"})
    assert t.snapshot.column_mapping == "name" and physical(t) == {"id": "id", "s": "s"}
    assert {r.id: r.s for r in t.read().collect()} == before
    t.rename_column("s", "text")
    with pytest.raises(InvalidArgumentError, match="took column mapping after its files were written"):
        t.drop_columns("text")
    t.delete("id < 10")
    assert {r.id: r.text for r in t.read().collect()} == {i: s for i, s in before.items() if i >= 10}
    assert_physical_keys(t, logged(t))


def test_conflict_checks_read_a_winners_physical_stats(lake, spark):
    """Under Serializable a DELETE conflicts with an append only where the appended files' stats
    (keyed physically in the log) cannot rule out its condition."""
    t = lake.create_table("ser", "id long, s string", properties={
        "delta.columnMapping.mode": "name", "delta.isolationLevel": "Serializable"})
    t.append(spark.sql("SELECT id, 'a' AS s FROM range(0, 100)"))
    loser = dml.delete(t.begin(), "id < 10")
    t.append(spark.sql("SELECT id, 'b' AS s FROM range(1000, 1010)"))
    loser.commit()
    loser = dml.delete(t.begin(), "id < 20")
    t.append(spark.sql("SELECT 15L AS id, 'c' AS s"))
    with pytest.raises(ConcurrentAppendException):
        loser.commit()
    # On a partitioned mapped table the message names the partition by its logical column.
    p = lake.create_table("ser_p", "id long, g int", partition_by=["g"], properties={
        "delta.columnMapping.mode": "id", "delta.isolationLevel": "Serializable"})
    p.append(spark.sql("SELECT id, 1 AS g FROM range(0, 10)"))
    loser = dml.delete(p.begin(), "g = 1 AND id < 5")
    p.append(spark.sql("SELECT 3L AS id, 1 AS g"))
    with pytest.raises(ConcurrentAppendException, match="partition 'g=1'"):
        loser.commit()
    assert ids_of(t) == sorted([15] + list(range(10, 100)) + list(range(1000, 1010)))


def test_row_level_concurrency_on_a_mapped_table(lake, spark):
    t = lake.create_table("rl", "id long, v long", properties={"delta.columnMapping.mode": "name", **DV})
    t.append(spark.sql("SELECT id, id AS v FROM range(0, 1000)").repartition(2))
    loser = dml.delete(t.begin(), "id % 10 = 1")
    t.update("id % 10 = 2", {"v": "-v"})
    loser.commit()
    got = {r.id: r.v for r in t.read().collect()}
    assert sorted(got) == [i for i in range(1000) if i % 10 != 1]
    assert all(v == (-i if i % 10 == 2 else i) for i, v in got.items())
    assert_physical_keys(t, logged(t))


def test_optimize_and_delete_both_commit_on_a_mapped_table(lake, spark):
    """Bin-packing tags its outputs with their inputs on an unpartitioned mapped table too, so a
    DELETE that commits first is carried onto the compacted file."""
    from skiplake.spark.optimize.compaction import optimize
    from skiplake.txn.row_placements import COMPACTED_FROM
    t = lake.create_table("opt", "id long, v long", properties={"delta.columnMapping.mode": "id", **DV})
    for start in range(0, 1000, 250):
        t.append(spark.sql(f"SELECT id, id AS v FROM range({start}, {start + 250})"))
    loser = optimize(t.begin())
    assert loser.added and all(COMPACTED_FROM in (a.tags or {}) for a in loser.added)
    t.delete("id % 100 = 7")
    loser.commit()
    assert ids_of(t) == [i for i in range(1000) if i % 100 != 7]
    assert len(t.snapshot.add_files) == 1
    assert_physical_keys(t, logged(t))
