"""The conflict matrix through real Spark operations: a loser is staged in its transaction (files
written, not yet committed), a winner commits, then the loser commits or raises what the isolation level says."""
from __future__ import annotations

import pytest

from skiplake.errors import ConcurrentAppendException, ConcurrentDeleteReadException
from skiplake.log.actions import AddFile
from skiplake.log.snapshot import Snapshot
from skiplake.spark import dml
from skiplake.spark.optimize import optimize


def rows(spark, ids: range, p: int):
    return spark.sql(f"SELECT id, {p} AS p, id AS v FROM range({ids.start}, {ids.stop})")


@pytest.fixture(params=["WriteSerializable", "Serializable"])
def table(request, lake, spark):
    t = lake.create_table("t", "id long, p int, v long", partition_by=["p"],
                          properties={"delta.isolationLevel": request.param})
    for p in (1, 2):
        t.append(rows(spark, range(p * 100, p * 100 + 50), p))
        t.append(rows(spark, range(p * 100 + 50, p * 100 + 100), p))
    return t


def ids(t, where="true"):
    return sorted(r.id for r in t.read(where).collect())


def test_delete_vs_concurrent_blind_append_same_partition(table, spark):
    loser = dml.delete(table.begin(), "p = 1 AND v < 1000")
    # Winner: a blind append into p = 1 of rows the DELETE's condition matches (v < 1000).
    table.append(spark.sql("SELECT id, 1 AS p, id - 1000 AS v FROM range(1000, 1005)"))
    if table.isolation_level == "Serializable":
        with pytest.raises(ConcurrentAppendException, match="p=1"):
            loser.commit()
        assert ids(table, "p = 1") == list(range(100, 200)) + list(range(1000, 1005))
    else:
        loser.commit()                                       # WriteSerializable: as if DELETE ran first
        assert ids(table, "p = 1") == list(range(1000, 1005))


def test_disjoint_partitions_never_conflict(table, spark):
    loser = dml.update(table.begin(), "p = 1", {"v": "v + 1"})
    table.delete("p = 2 AND v < 250")                   # winner in the other partition
    table.append(rows(spark, range(5000, 5002), 2))
    loser.commit()
    assert ids(table, "p = 1 AND v = id + 1") == list(range(100, 200))
    assert ids(table, "p = 2") == list(range(250, 300)) + [5000, 5001]


def test_merge_vs_update_in_the_same_partition(table, spark):
    src = spark.sql("SELECT 150L AS id, 1 AS p, -1L AS v")
    loser = dml.merge(table.begin(), src, dml.MergeClauses("target.id = source.id AND target.p = 1",
                                                           when_matched_update={"v": "source.v"}))
    table.update("p = 1 AND id = 120", {"v": "0"})      # winner rewrites a file of p = 1
    with pytest.raises((ConcurrentAppendException, ConcurrentDeleteReadException)):
        loser.commit()
    assert ids(table, "v = -1") == []


def test_optimize_vs_delete(table, spark):
    loser = optimize(table.begin())
    table.delete("p = 1 AND id < 110")                  # winner removes a file OPTIMIZE read
    with pytest.raises(ConcurrentDeleteReadException, match="DELETE committed version"):
        loser.commit()
    assert len(ids(table)) == 190


def test_blind_append_after_optimize_and_delete_after_optimize(table, spark):
    appender = dml.append(table.begin(), rows(spark, range(7000, 7003), 1))
    deleter = dml.delete(table.begin(), "p = 2 AND id = 210")
    table.optimize()                                          # winner compacts both partitions
    appender.commit()                                         # blind appends never conflict
    with pytest.raises(ConcurrentDeleteReadException, match="OPTIMIZE committed version"):
        deleter.commit()
    assert len(ids(table)) == 203
    appended = sum(1 for a in appender.actions if isinstance(a, AddFile))
    assert Snapshot.load(table.path).num_files == 2 + appended  # one compacted file per partition


def test_disjoint_data_ranges_do_not_conflict_in_an_unpartitioned_table(lake, spark):
    t = lake.create_table("u", "id long, v long", properties={"delta.isolationLevel": "Serializable"})
    t.append(spark.sql("SELECT id, id AS v FROM range(0, 100)").coalesce(1))
    t.append(spark.sql("SELECT id, id AS v FROM range(100, 200)").coalesce(1))
    loser = dml.delete(t.begin(), "v < 50")
    t.update("v >= 150", {"v": "v + 1000"})              # touches only the second file
    t.append(spark.sql("SELECT 500L AS id, 500L AS v"))       # blind append outside v < 50
    loser.commit()
    assert ids(t) == list(range(50, 200)) + [500]


def test_rows_a_delete_cannot_match_do_not_conflict_even_when_serializable(table, spark):
    loser = dml.delete(table.begin(), "p = 1 AND v < 1000")
    table.append(rows(spark, range(1000, 1005), 1))         # v >= 1000: stats prove no overlap
    loser.commit()
    assert ids(table, "p = 1") == list(range(1000, 1005))
