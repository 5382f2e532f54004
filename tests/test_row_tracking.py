"""Row tracking: row ids and row commit versions assigned at every commit as PROTOCOL.md asks,
the high-water mark in the `delta.rowTracking` domain, ids read back, and enabling it on a table
that has rows. delta-spark's side is in tests/test_delta_spark_interop.py."""
from __future__ import annotations

import json

import pytest

from skiplake.errors import InvalidArgumentError

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

    # A rewrite gives copied rows new ids past the mark, and says it did not keep them.
    t.update("id = 3", {"v": "v + 100"})
    assert t.history(1)[0]["tags"] == {"delta.rowTracking.preserved": "false"}
    after = _ids(t)
    assert len(set(i for i, _ in after.values())) == 150 and _mark(t) > 149
    assert after[3][1] == t.version and after[120] == ids[120]    # untouched files keep theirs
    t.delete("id >= 140")
    assert len(_ids(t)) == 140
    assert _ids(t, "id = 120") == {120: ids[120]}


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
