"""Row tracking: row ids and row commit versions assigned at every commit as PROTOCOL.md asks,
the high-water mark in the `delta.rowTracking` domain, ids read back, and enabling it on a table
that has rows. delta-spark's side: tests/test_delta_spark_reads.py (it reads skiplake's ids),
tests/test_golden_tables.py (skiplake reads its ids) and tests/test_delta_spark_writes.py."""
from __future__ import annotations

import json

import pytest

from skiplake.errors import InvalidArgumentError

pytestmark = pytest.mark.spark

ON = {"delta.enableRowTracking": "true"}
SCHEMA = "id long, v int"


def _rows(spark, lo: int, hi: int):
    return spark.sql(f"SELECT id, CAST(id % 10 AS INT) AS v FROM range({lo}, {hi})")


def _mark(t) -> int:
    return json.loads(t.snapshot.domain("delta.rowTracking"))["rowIdHighWaterMark"]


def _ids(t, where: str | None = None) -> dict[int, tuple[int, int]]:
    return {r.id: (r._row_id, r._row_commit_version) for r in t.read(where, with_row_ids=True).collect()}


def test_every_commit_assigns_ids_past_the_high_water_mark(lake, spark):
    t = lake.create_table("t", SCHEMA, properties=ON)
    p = t.snapshot.protocol
    assert {"rowTracking", "domainMetadata"} <= set(p.writerFeatures or ())
    config = t.properties
    assert config["delta.rowTracking.materializedRowIdColumnName"].startswith("_row-id-col-")
    assert config["delta.rowTracking.materializedRowCommitVersionColumnName"].startswith("_row-commit-version-col-")
    v1 = t.append(_rows(spark, 0, 100).repartition(2))
    v2 = t.append(_rows(spark, 100, 150))
    files = sorted(t.snapshot.add_files, key=lambda f: f.baseRowId)
    assert [f.defaultRowCommitVersion for f in files] == [v1] * 2 + [v2] * (len(files) - 2)
    # Each file's ids follow the previous file's: unique, gapless, up to the mark.
    assert files[0].baseRowId == 0
    for a, b in zip(files, files[1:]):
        assert b.baseRowId == a.baseRowId + a.num_records
    assert _mark(t) == 149
    ids = _ids(t)
    assert sorted(i for i, _ in ids.values()) == list(range(150))
    assert {v for _, v in ids.values()} == {v1, v2}
    commit_info = t.history(1)[0]
    assert commit_info["tags"] == {"delta.rowTracking.preserved": "true"}

    # A rewrite keeps the ids of the rows it copies; the updated row takes the new version.
    t.update("id = 3", {"v": "v + 100"})
    assert t.history(1)[0]["tags"] == {"delta.rowTracking.preserved": "true"}
    after = _ids(t)
    assert _mark(t) > 149   # the new file got a base past the mark all the same
    assert after == {**ids, 3: (ids[3][0], t.version)}
    t.delete("id >= 140")
    assert _ids(t) == {i: v for i, v in after.items() if i < 140}


def _tag(t) -> str:
    return t.history(1)[0]["tags"]["delta.rowTracking.preserved"]


@pytest.mark.parametrize("props", [{}, {"delta.enableDeletionVectors": "true"}, {"delta.columnMapping.mode": "name"}],
                         ids=["rewrites", "deletion-vectors", "column-mapping"])
def test_every_rewrite_keeps_the_ids_of_the_rows_it_copies(lake, spark, props):
    t = lake.create_table("t", SCHEMA, properties={**ON, **props})
    t.append(_rows(spark, 0, 100).repartition(4))
    ids = _ids(t)
    assert sorted(i for i, _ in ids.values()) == list(range(100))

    def check(new_versions: dict[int, int], gone: set[int] = frozenset()) -> None:
        nonlocal ids
        assert _tag(t) == "true"
        ids = {i: (ids[i][0], new_versions.get(i, ids[i][1])) for i in ids if i not in gone}
        got = _ids(t)
        assert {i: v for i, v in got.items() if i in ids} == ids
        ids = got

    # UPDATE: the updated rows keep their ids and take its version.
    v = t.update("v = 3", {"v": "v + 100"})
    check({i: v for i in range(3, 100, 10)})
    # DELETE of some rows of every file: the rest keep theirs.
    t.delete("id % 7 = 0")
    check({}, {i for i in range(100) if i % 7 == 0})
    # MERGE: updated rows keep their ids, deleted ones go, inserted ones get new ids past the mark.
    mark = _mark(t)
    source = spark.sql("SELECT id, CAST(-1 AS INT) AS v FROM range(80, 120)")
    (t.merge(source, "target.id = source.id").when_matched_update(condition="target.id < 90", set={"v": "source.v"})
     .when_matched_delete().when_not_matched_insert_all().execute())
    v = t.version
    check({i: v for i in range(80, 90)}, set(range(90, 100)))
    new = {i: ids[i] for i in range(100, 120)}
    assert all(rid > mark and version == v for rid, version in new.values())
    assert len({rid for rid, _ in ids.values()}) == len(ids)
    # OPTIMIZE bin-packs, Z-orders and clusters rows without changing their ids.
    before = t.snapshot.add_files
    t.optimize(min_files=2)
    assert {f.path for f in t.snapshot.add_files}.isdisjoint(f.path for f in before)
    check({})
    t.optimize(zorder_by=["v"], full=True)
    check({})
    t.cluster_by(["v"])
    t.optimize(full=True)
    check({})
    assert sorted(r.id for r in t.read().collect()) == sorted(ids)


def test_deletion_vectors_keep_a_files_ids(lake, spark):
    t = lake.create_table("t", SCHEMA, properties={**ON, "delta.enableDeletionVectors": "true"})
    t.append(_rows(spark, 0, 50).repartition(1))
    before = _ids(t)
    t.delete("id % 2 = 0")
    [f] = t.snapshot.add_files
    assert f.deletionVector and f.baseRowId == 0
    assert _ids(t) == {i: before[i] for i in before if i % 2}


def test_enabling_row_tracking_gives_the_rows_already_there_their_ids(lake, spark):
    t = lake.create_table("t", SCHEMA)
    t.append(_rows(spark, 0, 30).repartition(3))
    with pytest.raises(InvalidArgumentError, match="row tracking enabled"):
        t.read(with_row_ids=True)
    v = t.set_properties(ON)
    assert all(f.baseRowId is not None and f.defaultRowCommitVersion == v for f in t.snapshot.add_files)
    assert sorted(i for i, _ in _ids(t).values()) == list(range(30))
    assert t.read().count() == 30
    # Suspended: writers stop assigning.
    t.set_properties({"delta.rowTrackingSuspended": "true", "delta.enableRowTracking": "false"})
    t.append(_rows(spark, 30, 40).repartition(1))
    assert sum(1 for f in t.snapshot.add_files if f.baseRowId is None) == 1
