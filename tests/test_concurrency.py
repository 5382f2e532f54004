"""The conflict matrix through real Spark operations: a loser is staged in its transaction (files
written, not yet committed), a winner commits, then the loser commits or raises what the isolation level says."""
from __future__ import annotations

import pytest

from skiplake.errors import ConcurrentAppendException, ConcurrentDeleteReadException
from skiplake.log.actions import AddFile
from skiplake.log.snapshot import Snapshot
from skiplake.spark import merge
from skiplake.spark.dml import dml_jobs as dml
from skiplake.spark.optimize.compaction import optimize

pytestmark = [pytest.mark.spark, pytest.mark.connect]


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


@pytest.mark.both_modes
def test_disjoint_partitions_never_conflict(table, spark):
    loser = dml.update(table.begin(), "p = 1", {"v": "v + 1"})
    table.delete("p = 2 AND v < 250")                   # winner in the other partition
    table.append(rows(spark, range(5000, 5002), 2))
    loser.commit()
    assert ids(table, "p = 1 AND v = id + 1") == list(range(100, 200))
    assert ids(table, "p = 2") == list(range(250, 300)) + [5000, 5001]


def test_merge_vs_update_of_another_file_of_the_same_partition(table, spark):
    # The MERGE reads only the target files its source's keys can match (id 150: the second
    # file of p = 1); an UPDATE rewriting the first file does not touch what it read.
    src = spark.sql("SELECT 150L AS id, 1 AS p, -1L AS v")
    loser = merge.merge(table.begin(), src, merge.MergeClauses("target.id = source.id AND target.p = 1",
                                                               when_matched_update={"v": "source.v"}))
    table.update("p = 1 AND id = 120", {"v": "0"})
    loser.commit()
    assert ids(table, "v = -1") == [150] and ids(table, "v = 0") == [120]


def test_merge_vs_update_of_the_file_it_reads(table, spark):
    src = spark.sql("SELECT 150L AS id, 1 AS p, -1L AS v")
    loser = merge.merge(table.begin(), src, merge.MergeClauses("target.id = source.id AND target.p = 1",
                                                               when_matched_update={"v": "source.v"}))
    table.update("p = 1 AND id = 160", {"v": "0"})      # winner rewrites the file holding id 150
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


@pytest.mark.parametrize("level", [pytest.param("WriteSerializable", marks=pytest.mark.both_modes), "Serializable"])
def test_merges_with_disjoint_source_keys_both_commit_on_a_clustered_table(lake, spark, level):
    """Each MERGE's target read is narrowed to the files its source's keys can match (dynamic
    file pruning of MERGE), so two jobs upserting disjoint key ranges of one unpartitioned table
    clustered by the key do not conflict; without that narrowing each read the whole table."""
    t = lake.create_table("c", "id long, v long", properties={"delta.isolationLevel": level})
    for lo in range(0, 400, 100):                      # four files: ids 0-99, 100-199, 200-299, 300-399
        t.append(spark.sql(f"SELECT id, 0L AS v FROM range({lo}, {lo + 100})").coalesce(1))
    first = spark.sql("SELECT id, 1L AS v FROM range(10, 20) UNION ALL SELECT 50L, 5L")   # keys of file 1
    second = spark.sql("SELECT id, 2L AS v FROM range(310, 320)")                        # keys of file 4
    clauses = merge.MergeClauses("target.id = source.id", when_matched_update={"v": "source.v"},
                                 when_not_matched_insert="*")
    a = merge.merge(t.begin(), first, clauses)
    b = merge.merge(t.begin(), second, clauses)
    assert len(a.read_set.files) == 1 and len(b.read_set.files) == 1
    a.commit()
    b.commit()
    rows = {r.id: r.v for r in t.read().collect()}
    assert len(rows) == 400
    assert {i for i, v in rows.items() if v == 1} == set(range(10, 20)) and rows[50] == 5
    assert {i for i, v in rows.items() if v == 2} == set(range(310, 320))

    # Overlapping key ranges still conflict: both read the file of ids 0-99.
    c = merge.merge(t.begin(), spark.sql("SELECT 30L AS id, 3L AS v"), clauses)
    d = merge.merge(t.begin(), spark.sql("SELECT 40L AS id, 4L AS v"), clauses)
    c.commit()
    with pytest.raises((ConcurrentAppendException, ConcurrentDeleteReadException)):
        d.commit()


@pytest.mark.parametrize("hit", [False, True])
def test_serializable_reads_the_winners_rows_when_stats_cannot_rule_them_out(lake, spark, hit):
    """Under Serializable an append whose file's min/max span the loser's condition conflicts
    only if one of its rows really satisfies it (read exactly in the driver; partition values
    from the log)."""
    t = lake.create_table("s", "id long, p int, v long", partition_by=["p"],
                          properties={"delta.isolationLevel": "Serializable"})
    t.append(rows(spark, range(100, 200), 1))
    loser = dml.delete(t.begin(), "p = 1 AND v IN (150, 160)")
    # v spans [5, 1995] in the new file: its stats cannot rule out v IN (150, 160).
    extra = ", 160" if hit else ""
    t.append(spark.sql(f"SELECT id, 1 AS p, id AS v FROM VALUES (5), (1995){extra} AS r(id)"))
    if hit:
        with pytest.raises(ConcurrentAppendException, match="p=1"):
            loser.commit()
        assert 150 in ids(t)
        return
    loser.commit()
    assert ids(t) == sorted([5, 1995] + [i for i in range(100, 200) if i not in (150, 160)])


def test_a_transaction_that_read_the_whole_table_conflicts_with_any_change(table, spark):
    """txn.read_whole_table() (the low-level API) reads every row and records it: an append
    anywhere conflicts under Serializable, and a removal of any file under both levels."""
    txn = table.begin()
    assert sorted(r.id for r in txn.read_whole_table().collect()) == ids(table)
    assert txn.read_set.whole_table
    txn.append(rows(spark, range(900, 901), 3))
    table.append(rows(spark, range(950, 951), 2))
    if table.properties.get("delta.isolationLevel") == "Serializable":
        with pytest.raises(ConcurrentAppendException):
            txn.commit()
    else:
        txn.commit()   # a blind append is no conflict under WriteSerializable
    later = table.begin()
    later.read_whole_table()
    later.append(rows(spark, range(990, 991), 3))
    table.delete("p = 2")   # whole files removed, none added
    with pytest.raises(ConcurrentDeleteReadException):
        later.commit()
