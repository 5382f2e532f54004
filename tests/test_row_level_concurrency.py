"""Row-level concurrency on tables with deletion vectors, through real Spark operations.

A loser is staged in its transaction (DVs and files written, not yet committed), a winner
commits, then the loser commits, rebased on the winner's marks, or raises what the rules say:
DELETE/UPDATE/MERGE against each other conflict only when they change the same row; INSERT
never conflicts with them under WriteSerializable.
"""
from __future__ import annotations

import itertools

import pytest

from skiplake.errors import ConcurrentAppendException, ConcurrentDeleteDeleteException, ConcurrentDeleteReadException
from skiplake.spark import merge
from skiplake.spark.dml import dml_jobs as dml
from skiplake.spark.optimize.compaction import optimize
from skiplake.txn.row_placements import COMPACTED_FROM
from tests.tiers import gate_sample

pytestmark = pytest.mark.spark


@pytest.fixture(params=["WriteSerializable", "Serializable"])
def table(request, lake, spark):
    # Unpartitioned, two files of 1,000 rows: every operation below touches both files.
    t = lake.create_table("t", "id long, v long", properties={
        "delta.isolationLevel": request.param, "delta.enableDeletionVectors": "true"})
    t.append(spark.sql("SELECT id, id AS v FROM range(0, 2000)").repartition(2))
    return t


def values(t) -> dict[int, int]:
    return {r.id: r.v for r in t.read().collect()}


def dv_count(t) -> int:
    return sum(1 for f in t.snapshot.add_files if f.deletionVector)


def test_deletes_of_different_rows_of_the_same_files_both_commit(table):
    loser = dml.delete(table.begin(), "id % 10 = 1")
    table.delete("id % 10 = 2")
    loser.commit()
    got = values(table)
    assert sorted(got) == [i for i in range(2000) if i % 10 not in (1, 2)]
    assert dv_count(table) == 2 and len(table.snapshot.add_files) == 2


def test_updates_of_different_rows_both_commit_and_neither_is_lost(table):
    loser = dml.update(table.begin(), "id % 10 = 3", {"v": "-1"})
    table.update("id % 10 = 4", {"v": "-2"})
    if table.isolation_level == "Serializable":
        # The winner's updated rows are new rows; their file's stats cannot rule out the loser's
        # condition, which a Serializable reader must have seen.
        with pytest.raises(ConcurrentAppendException):
            loser.commit()
        return
    loser.commit()
    got = values(table)
    assert len(got) == 2000
    assert all(got[i] == (-1 if i % 10 == 3 else -2 if i % 10 == 4 else i) for i in range(2000))


def test_changes_of_the_same_row_conflict_naming_the_file_and_rows(table):
    loser = dml.update(table.begin(), "id % 100 = 5", {"v": "-1"})
    table.delete("id IN (5, 105, 1995)")
    with pytest.raises(ConcurrentDeleteDeleteException, match=r"changed \d+ rows? of .*part-") as e:
        loser.commit()
    assert "row-level" in str(e.value)
    got = values(table)
    assert 5 not in got and 105 not in got and got[205] == 205  # the loser wrote nothing


def test_merge_vs_delete_of_other_rows(table, spark):
    src = spark.sql("SELECT id, -id AS v FROM range(0, 2000) WHERE id % 10 = 6")
    loser = merge.merge(table.begin(), src, merge.MergeClauses("target.id = source.id",
                                                               when_matched_update={"v": "source.v"}))
    table.delete("id % 10 = 7")
    loser.commit()
    got = values(table)
    assert sorted(got) == [i for i in range(2000) if i % 10 != 7]
    assert all(got[i] == (-i if i % 10 == 6 else i) for i in got)


def test_insert_never_conflicts_with_a_delete_under_write_serializable(table, spark):
    loser = dml.delete(table.begin(), "v < 100")
    table.append(spark.sql("SELECT 5000L + id AS id, id AS v FROM range(3)"))  # rows v < 100
    if table.isolation_level == "Serializable":
        with pytest.raises(ConcurrentAppendException):
            loser.commit()
    else:
        loser.commit()
        assert sorted(values(table)) == list(range(100, 2000)) + [5000, 5001, 5002]


def test_a_winner_that_rewrote_the_file_conflicts_at_file_level(table):
    loser = dml.delete(table.begin(), "id = 10")
    table.set_properties({"delta.enableDeletionVectors": "false"})  # metadata change: conflicts anyway
    with pytest.raises(Exception):
        loser.commit()
    assert 10 in values(table)


def test_three_writers_rebase_on_each_other_in_turn(table):
    a = dml.delete(table.begin(), "id % 10 = 1")
    b = dml.update(table.begin(), "id % 10 = 2", {"v": "0"})
    table.delete("id % 10 = 3")
    b.commit()
    if table.isolation_level == "Serializable":
        with pytest.raises(ConcurrentAppendException):  # b's updated rows, as above
            a.commit()
        return
    a.commit()
    got = values(table)
    assert sorted(got) == [i for i in range(2000) if i % 10 not in (1, 3)]
    assert all(got[i] == (0 if i % 10 == 2 else i) for i in got)


# ---------------------------------------------------------------- OPTIMIZE against DML

def compacted(t) -> list:
    return [f for f in t.snapshot.add_files if f.tags and COMPACTED_FROM in f.tags]


def _staged_dml(spark, change: str):
    """A DML staged in a transaction: DELETE, UPDATE, MERGE of a tenth of the rows, or a DELETE
    of over half of each file's rows, which rewrites the files rather than marking them."""
    return {
        "delete": lambda txn: dml.delete(txn, "id % 10 = 1"),
        "update": lambda txn: dml.update(txn, "id % 10 = 3", {"v": "-1"}),
        "merge": lambda txn: merge.merge(txn, spark.sql("SELECT id, -id AS v FROM range(0, 2000) WHERE id % 10 = 6"),
                                         merge.MergeClauses("target.id = source.id",
                                                            when_matched_update={"v": "source.v"})),
        "rewrite": lambda txn: dml.delete(txn, "id % 10 < 7"),
    }[change]


# The rows (by id % 10) gone after `id % 10 = 9` was deleted and the staged DML committed.
GONE = {"delete": {1, 9}, "update": {9}, "merge": {9}, "rewrite": {0, 1, 2, 3, 4, 5, 6, 9}}


CHANGES, WINNERS = ["delete", "update", "merge", "rewrite"], ["optimize", "dml"]


# The gate runs each change with one winner, and each winner with two changes; the full tier all.
@pytest.mark.parametrize("change, winner", gate_sample(
    itertools.product(CHANGES, WINNERS), lambda c: (CHANGES.index(c[0]) + WINNERS.index(c[1])) % 2 == 0))
def test_optimize_and_dml_both_commit_whichever_wins(table, spark, winner, change):
    """OPTIMIZE (bin-packing) and a DELETE/UPDATE/MERGE of the same files both commit, in either
    order: no deletion lost, no deleted row back, no row twice. The files already carry DVs, so
    the rows' new places skip rows deleted before OPTIMIZE read them."""
    table.delete("id % 10 = 9")
    stage = _staged_dml(spark, change)
    if winner == "optimize":
        loser = stage(table.begin())
        optimize(table.begin()).commit()
    else:
        loser = optimize(table.begin())
        stage(table.begin()).commit()
    loser.commit()
    gone = GONE[change]
    got = values(table)
    assert sorted(got) == [i for i in range(2000) if i % 10 not in gone]
    assert all(got[i] == (-1 if change == "update" and i % 10 == 3 else
                          -i if change == "merge" and i % 10 == 6 else i) for i in got)
    # Every row once: nothing a DV hid came back through the compacted file, nothing doubled.
    assert table.read().count() == len(got)
    assert compacted(table) or change == "rewrite"


def test_optimize_rebases_on_several_dml_winners_in_turn(table):
    loser = optimize(table.begin())
    table.delete("id % 10 = 1")
    table.update("id % 10 = 2", {"v": "-2"})
    table.delete("id IN (4, 14, 1994)")
    loser.commit()
    got = values(table)
    assert sorted(got) == [i for i in range(2000) if i % 10 != 1 and i not in (4, 14, 1994)]
    assert all(got[i] == (-2 if i % 10 == 2 else i) for i in got)
    [out] = compacted(table)
    assert out.deletionVector is not None  # the winners' marks, carried to the compacted file
    # A DML staged before OPTIMIZE committed still lands on the rows' new place.
    later = dml.delete(table.begin(), "id % 10 = 5")
    optimize(table.begin()).commit()
    later.commit()
    assert sorted(values(table)) == sorted(i for i in got if i % 10 != 5)


def test_two_dml_and_an_optimize_interleaved(table):
    a = dml.delete(table.begin(), "id % 10 = 1")
    b = optimize(table.begin())
    c = dml.update(table.begin(), "id % 10 = 2", {"v": "-2"})
    b.commit()
    a.commit()
    c.commit()  # its winners wrote no new rows: nothing to conflict with at either level
    got = values(table)
    assert sorted(got) == [i for i in range(2000) if i % 10 != 1]
    assert all(got[i] == (-2 if i % 10 == 2 else i) for i in got)


def test_two_optimizes_of_the_same_files_still_conflict(table):
    loser = optimize(table.begin())
    optimize(table.begin()).commit()
    with pytest.raises(ConcurrentDeleteReadException):
        loser.commit()
    assert len(values(table)) == 2000


def test_the_same_row_changed_through_a_compaction_conflicts(table):
    """A DML winner and a DML loser that change the same row conflict, also when an OPTIMIZE
    moved the row in between."""
    loser = dml.delete(table.begin(), "id IN (7, 9)")
    optimize(table.begin()).commit()
    table.delete("id IN (7, 8)")
    with pytest.raises(ConcurrentDeleteDeleteException, match="changed 1 row"):
        loser.commit()
    got = values(table)
    assert 7 not in got and 8 not in got and 9 in got  # the loser changed nothing


def test_optimize_reports_what_it_committed_after_a_rebase(table):
    """When a DELETE that commits first removes every row OPTIMIZE compacted, OPTIMIZE's rebase
    drops its actions, and its result says so (not what it had staged)."""
    loser = optimize(table.begin())
    assert len(loser.added) == 1 and len(loser.removed) == 2
    table.delete("id >= 0")
    result = loser.commit()
    assert (result.files_added, result.files_removed, result.bytes_added) == (0, 0, 0)
    assert values(table) == {} and table.snapshot.num_files == 0


# ------------------------------------------- reordering OPTIMIZE against DML, by row ids

# The gate: each layout with each winner, and each change once; the full tier all seven.
@pytest.mark.parametrize("layout, winner, change", gate_sample([
    ("cluster", "optimize", "delete"), ("cluster", "dml", "delete"), ("cluster", "optimize", "merge"),
    ("cluster", "dml", "update"), ("cluster", "optimize", "rewrite"), ("zorder", "dml", "rewrite"),
    ("zorder", "optimize", "update"),
], lambda c: c not in {("cluster", "dml", "delete"), ("cluster", "optimize", "rewrite")}))
def test_a_reordering_optimize_and_dml_both_commit_by_row_ids(lake, spark, layout, winner, change):
    """Clustering and Z-order rewrite rows in a new order, so no list of inputs says where each
    row went; on a table with row tracking the outputs hold each row's id, and OPTIMIZE and a
    DELETE/UPDATE/MERGE of the same files still both commit, in either order, with every
    change kept and each row once."""
    t = lake.create_table("c", "id long, v long", cluster_by=["v"] if layout == "cluster" else None, properties={
        "delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true"})
    t.append(spark.sql("SELECT id, (id * 7919) % 2000 AS v FROM range(0, 2000)").repartition(2))
    t.delete("id % 10 = 9")
    stage = _staged_dml(spark, change)

    def reorder():
        # Small target files: the rows of each input spread over several outputs.
        return optimize(t.begin(), zorder_by=["v"] if layout == "zorder" else None, full=True,
                        target_file_size=4096)

    ids_before = {r.id: r._row_id for r in t.read(with_row_ids=True).collect()}
    if winner == "optimize":
        loser = stage(t.begin())
        reorder().commit()
    else:
        loser = reorder()
        stage(t.begin()).commit()
    loser.commit()
    gone = GONE[change]
    got = values(t)
    assert sorted(got) == [i for i in range(2000) if i % 10 not in gone]
    assert all(got[i] == (-1 if change == "update" and i % 10 == 3 else
                          -i if change == "merge" and i % 10 == 6 else (i * 7919) % 2000) for i in got)
    assert t.read().count() == len(got)
    # The reordered files stand, less the rows the DML changed (a rewrite of every input leaves none).
    assert any(f.tags and "ZCUBE_ID" in f.tags for f in t.snapshot.add_files) or change == "rewrite"
    # Every row kept the id it had, through both commits.
    assert {r.id: r._row_id for r in t.read(with_row_ids=True).collect()} == {i: ids_before[i] for i in got}


def test_row_ids_change_nothing_between_two_optimizes(lake, spark):
    """Row ids reconcile OPTIMIZE with DML only. A bin-packing OPTIMIZE that loses to a Z-order
    still commits (its output drops the rows the Z-order took, as without row tracking), and two
    Z-orders of the same files still conflict."""
    t = lake.create_table("c", "id long, v long", properties={
        "delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true"})
    t.append(spark.sql("SELECT id, (id * 7919) % 2000 AS v FROM range(0, 2000)").repartition(2))
    t.delete("id % 10 = 9")
    loser = optimize(t.begin())
    optimize(t.begin(), zorder_by=["v"], full=True, target_file_size=4096).commit()
    loser.commit()
    got = values(t)
    assert sorted(got) == [i for i in range(2000) if i % 10 != 9] and t.read().count() == len(got)
    other = optimize(t.begin(), zorder_by=["id"], full=True)
    optimize(t.begin(), zorder_by=["v", "id"], full=True).commit()
    with pytest.raises(ConcurrentDeleteReadException):
        other.commit()
    assert t.read().count() == len(got)
