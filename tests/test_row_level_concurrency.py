"""Row-level concurrency on tables with deletion vectors, through real Spark operations.

A loser is staged in its transaction (DVs and files written, not yet committed), a winner
commits, then the loser commits, rebased on the winner's marks, or raises what the rules say:
DELETE/UPDATE/MERGE against each other conflict only when they change the same row; INSERT
never conflicts with them under WriteSerializable.
"""
from __future__ import annotations

import pytest

from skiplake.errors import ConcurrentAppendException, ConcurrentDeleteDeleteException
from skiplake.spark import dml, merge


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
