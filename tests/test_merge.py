"""MERGE's builder: each kind of clause, Delta's rules, its refusals, its metrics, and how it
keeps the table's layout (pruning, deletion vectors, partitions, buckets, column mapping,
concurrent writers). The comparison with delta-spark itself is tests/test_merge_differential.py.
"""
from __future__ import annotations

import json
import os

import pytest
from pyspark.sql import functions as F

import skiplake
from skiplake import BucketSpec
from skiplake.errors import (
    ConcurrentDeleteDeleteException,
    InvalidArgumentError,
    MergeClauseError,
    MergeConflictError,
)
from skiplake.log.actions import AddFile, RemoveFile
from skiplake.log.snapshot import log_storage, read_commit
from skiplake.spark.merge import MergeBuilder, MergeResult

pytestmark = pytest.mark.spark


def rows(t, columns: str = "id, v, s") -> list[tuple]:
    df = t.read().selectExpr(*[c.strip() for c in columns.split(",")])
    return sorted((tuple(r) for r in df.collect()), key=lambda r: tuple((x is None, x) for x in r))


def actions(t, version: int) -> list:
    return read_commit(log_storage(t.path), version)


@pytest.fixture
def table(lake, spark):
    """ids 0..29 in three files (0-9, 10-19, 20-29), v = id * 10, s = 'a'."""
    t = lake.create_table("t", "id long, v long, s string")
    for lo in (0, 10, 20):
        t.append(spark.sql(f"SELECT id, id * 10 AS v, 'a' AS s FROM range({lo}, {lo + 10})").coalesce(1))
    return t


def src(spark, sql: str):
    return spark.sql(sql)


def test_builder_clauses_in_order_first_condition_wins(table, spark):
    source = src(spark, "SELECT id, -id AS v, 'src' AS s, CAST(id % 3 AS INT) AS op FROM range(5, 35)")
    b = table.merge(source, "target.id = source.id")
    assert isinstance(b, MergeBuilder)
    b2 = b.when_matched_delete("source.op = 0")
    assert b.spec.clauses == () and len(b2.spec.clauses) == 1   # each call returns a new builder
    result = (b2.when_matched_update("source.op = 1", set={"v": "source.v", "s": "'one'"})
              .when_matched_update(set={"s": "'other'"})
              .when_not_matched_insert("source.op = 0", values={"id": "source.id", "v": "0", "s": "'zero'"})
              .when_not_matched_insert_all("source.op = 1")
              .execute())
    assert isinstance(result, MergeResult) and result.version == table.version
    expected = {i: (i * 10, "a") for i in range(30)}
    for i in range(5, 35):
        op = i % 3
        if i < 30:
            if op == 0:
                del expected[i]
            else:
                expected[i] = (-i, "one") if op == 1 else (i * 10, "other")
        elif op != 2:
            expected[i] = (0, "zero") if op == 0 else (-i, "src")
    assert rows(table) == sorted((k, *v) for k, v in expected.items())
    assert (result.num_target_rows_matched_deleted, result.num_target_rows_matched_updated,
            result.num_target_rows_inserted) == (8, 17, 4)


def test_not_matched_by_source_update_and_delete(table, spark):
    source = src(spark, "SELECT id, 'new' AS s FROM range(12, 18)")
    result = (table.merge(source, "target.id = source.id")
              .when_matched_update(set={"s": "source.s"})
              .when_not_matched_by_source_delete("target.id < 5")
              .when_not_matched_by_source_update("target.id >= 25", set={"v": "target.v + 1", "s": "'stale'"})
              .execute())
    got = {r[0]: r[1:] for r in rows(table)}
    assert sorted(got) == list(range(5, 30))
    assert all(got[i] == (i * 10, "new") for i in range(12, 18))
    assert all(got[i] == (i * 10 + 1, "stale") for i in range(25, 30))
    assert all(got[i] == (i * 10, "a") for i in list(range(5, 12)) + list(range(18, 25)))
    assert (result.num_target_rows_matched_updated, result.num_target_rows_not_matched_by_source_updated,
            result.num_target_rows_not_matched_by_source_deleted) == (6, 5, 5)
    assert result.num_target_rows_updated == 11 and result.num_target_rows_deleted == 5
    # Files 0-9 (deletes), 10-19 (updates) and 20-29 (NOT MATCHED BY SOURCE updates) all change.
    assert result.num_target_files_removed == 3


def test_metrics_go_into_the_commit_as_delta_names_them(table, spark):
    source = src(spark, "SELECT id, -id AS v, 'b' AS s FROM range(25, 35)")
    result = (table.merge(source, "target.id = source.id")
              .when_matched_update_all().when_not_matched_insert_all().execute())
    info = table.history(1)[0]
    metrics = info["operationMetrics"]
    assert info["operation"] == "MERGE"
    assert (result.num_source_rows, result.num_target_rows_updated, result.num_target_rows_inserted,
            result.num_target_rows_copied, result.num_output_rows) == (10, 5, 5, 5, 15)
    assert result.num_affected_rows == 10
    assert result.num_target_files_removed == 1 and result.num_target_files_added >= 1
    assert result.num_target_bytes_added > 0 and result.num_target_bytes_removed > 0
    assert {k: metrics[k] for k in result.operation_metrics()} == result.operation_metrics()
    assert metrics["numTargetRowsInserted"] == "5" and metrics["numSourceRows"] == "10"
    params = info["operationParameters"]
    assert json.loads(params["predicate"]) == ["target.id = source.id"]
    assert json.loads(params["matchedPredicates"]) == [{"actionType": "update"}]
    assert json.loads(params["notMatchedPredicates"]) == [{"actionType": "insert"}]
    assert json.loads(params["notMatchedBySourcePredicates"]) == []


def test_delta_rules_refuse_before_anything_is_read(table, spark):
    source = src(spark, "SELECT id, id AS v, 'a' AS s FROM range(3)")
    b = table.merge(source, "target.id = source.id")
    cases = [
        (b, "no_clauses"),
        (b.when_matched_delete().when_matched_update_all(), "condition_order"),
        (b.when_not_matched_insert_all().when_not_matched_insert_all("source.v > 1"), "condition_order"),
        (b.when_not_matched_by_source_delete().when_not_matched_by_source_delete("target.v > 1"), "condition_order"),
        (b.when_not_matched_by_source_delete("source.v > 1"), "unresolved"),
        (b.when_not_matched_by_source_update(set={"v": "source.v"}), "unresolved"),
        (b.when_not_matched_insert(values={"id": "target.id"}), "unresolved"),
        (b.when_matched_update(set={"nope": "1"}), "unresolved"),
        (b.when_matched_update(set={"v": "source.nope"}), "unresolved"),
        (b.when_matched_update(set={"v": "1", "V": "2"}), "duplicate_column"),
        (b.when_matched_delete("rand() > 0.5"), "non_deterministic"),
        (b.when_matched_delete("sum(source.v) > 1"), "aggregate"),
        (b.when_matched_delete("source.v IN (SELECT 1)"), "subquery"),
        (b.when_not_matched_insert(values={"s.x": "1"}), "nested_insert"),
        (b.when_matched_update(set={"v": "source.v +"}), "invalid"),
        (table.merge(source, "target.id = source.nope").when_matched_delete(), "unresolved"),
        (table.merge(source, "id = id").when_matched_delete(), "ambiguous"),
        (table.merge(source, "target.id = rand()").when_matched_delete(), "non_deterministic"),
    ]
    v = table.version
    for builder, reason in cases:
        with pytest.raises(MergeClauseError) as e:
            builder.execute()
        assert e.value.reason == reason, (builder, str(e.value))
        assert table.path in str(e.value)
    assert skiplake.Table.open(spark, table.path).version == v
    with pytest.raises(MergeClauseError, match="sees only the target's columns"):
        b.when_not_matched_by_source_delete("source.v > 1").execute()
    with pytest.raises(InvalidArgumentError, match="set="):
        b.when_matched_update()
    with pytest.raises(InvalidArgumentError, match="aliases must differ"):
        table.merge(source, "a.id = a.id", source_alias="a", target_alias="A")


def test_star_needs_every_target_column_in_the_source_without_evolution(table, spark):
    source = src(spark, "SELECT id, -id AS v FROM range(25, 32)")   # no `s`
    with pytest.raises(MergeClauseError, match="no 's'") as e:
        table.merge(source, "target.id = source.id").when_matched_update_all().execute()
    assert e.value.reason == "unresolved"
    with pytest.raises(MergeClauseError, match="INSERT"):
        table.merge(source, "target.id = source.id").when_not_matched_insert_all().execute()


def test_schema_evolution_adds_the_source_columns(table, spark):
    source = src(spark, "SELECT id, -id AS v, CAST(id AS INT) AS x, 'y' AS y FROM range(25, 32)")
    v0 = table.version
    result = (table.merge(source, "target.id = source.id")
              .when_matched_update_all().when_not_matched_insert_all()
              .when_not_matched_by_source_update("target.id < 2", set={"s": "'old'"})
              .with_schema_evolution().execute())
    assert table.schema.simpleString() == "struct<id:bigint,v:bigint,s:string,x:int,y:string>"
    got = {r[0]: r[1:] for r in rows(table, "id, v, s, x, y")}
    assert got[26] == (-26, "a", 26, "y")          # UPDATE *: s (not in the source) keeps its value
    assert got[31] == (-31, None, 31, "y")          # INSERT *: s is NULL
    assert got[0] == (0, "old", None, None) and got[5] == (50, "a", None, None)
    assert result.num_target_rows_updated == 7 and result.num_target_rows_inserted == 2
    assert any(a.__class__.__name__ == "Metadata" for a in actions(table, v0 + 1))
    # An explicit assignment may name a source column the table lacks; NOT MATCHED BY SOURCE cannot.
    source2 = src(spark, "SELECT 1L AS id, 5L AS z")
    (table.merge(source2, "target.id = source.id").when_matched_update(set={"z": "source.z * 2"})
     .with_schema_evolution().execute())
    assert table.read("id = 1").select("z").first()[0] == 10 and table.read("id = 2").select("z").first()[0] is None
    with pytest.raises(MergeClauseError) as e:
        (table.merge(src(spark, "SELECT 1L AS id, 5L AS w"), "target.id = source.id")
         .when_matched_update(set={"w": "source.w"}).when_not_matched_by_source_update(set={"w": "1"})
         .with_schema_evolution().execute())
    assert e.value.reason == "unresolved"
    with pytest.raises(MergeClauseError) as e:
        table.merge(src(spark, "SELECT 1L AS id, NULL AS n"), "target.id = source.id") \
            .when_not_matched_insert_all().with_schema_evolution().execute()
    assert e.value.reason == "void_column"


def test_several_matches_are_refused_unless_the_only_matched_clause_deletes(table, spark):
    dup = src(spark, "SELECT 5L AS id, 1L AS v, 'd' AS s UNION ALL SELECT 5L, 2L, 'd' UNION ALL SELECT 7L, 3L, 'd'")
    v = table.version
    for build in (lambda b: b.when_matched_update(set={"v": "source.v"}),
                  lambda b: b.when_matched_delete("source.v > 0"),
                  lambda b: b.when_not_matched_by_source_delete("target.id = 100")):
        with pytest.raises(MergeConflictError, match="several source rows"):
            build(table.merge(dup, "target.id = source.id")).execute()
    assert skiplake.Table.open(spark, table.path).version == v
    # Delta allows it for one unconditional DELETE (whatever the other kinds' clauses), and counts
    # each deleted row once.
    result = (table.merge(dup, "target.id = source.id").when_matched_delete().when_not_matched_insert_all()
              .when_not_matched_by_source_delete("target.id = 100").execute())
    assert result.num_target_rows_deleted == 2 and result.num_target_rows_inserted == 0
    assert [r[0] for r in rows(table)] == [i for i in range(30) if i not in (5, 7)]
    # A matched-only MERGE whose clauses' target conditions rule out a file never sees its rows' matches.
    table.merge(src(spark, "SELECT 15L AS id UNION ALL SELECT 15L UNION ALL SELECT 25L"), "target.id = source.id") \
        .when_matched_update("target.id >= 20", set={"s": "'late'"}).execute()
    assert table.read("s = 'late'").count() == 1


def test_null_keys_never_match(table, spark):
    table.append(spark.sql("SELECT CAST(NULL AS BIGINT) AS id, -1L AS v, 'nullkey' AS s"))
    source = src(spark, "SELECT CAST(NULL AS BIGINT) AS id, 7L AS v, 'src' AS s UNION ALL SELECT 3L, 7L, 'src'")
    result = (table.merge(source, "target.id = source.id")
              .when_matched_update_all().when_not_matched_insert_all()
              .when_not_matched_by_source_update("target.id IS NULL", set={"s": "'unmatched'"}).execute())
    got = rows(table)
    assert (None, 7, "src") in got and (None, -1, "unmatched") in got and (3, 7, "src") in got
    assert result.num_target_rows_inserted == 1 and result.num_target_rows_matched_updated == 1
    # The null-safe equality matches them.
    table.merge(src(spark, "SELECT CAST(NULL AS BIGINT) AS id"), "target.id <=> source.id").when_matched_delete() \
        .execute()
    assert not [r for r in rows(table) if r[0] is None]


def test_nested_field_update_rebuilds_the_struct(lake, spark):
    t = lake.create_table("n", "id long, st struct<a:int,b:string>")
    t.append(spark.sql("SELECT 1L AS id, named_struct('a', 1, 'b', 'x') AS st UNION ALL "
                       "SELECT 2L, CAST(NULL AS STRUCT<a:INT,b:STRING>)"))
    t.merge(src(spark, "SELECT id, 9 AS a FROM range(1, 3)"), "target.id = source.id") \
        .when_matched_update(set={"st.a": "source.a"}).execute()
    got = {r.id: r.st for r in t.read().collect()}
    assert (got[1].a, got[1].b) == (9, "x") and (got[2].a, got[2].b) == (9, None)   # as Delta: a struct of NULLs
    with pytest.raises(MergeClauseError, match="does not have"):
        t.merge(src(spark, "SELECT 1L AS id"), "target.id = source.id") \
            .when_matched_update(set={"st.c": "1"}).execute()
    with pytest.raises(MergeClauseError) as e:
        t.merge(src(spark, "SELECT 1L AS id"), "target.id = source.id") \
            .when_matched_update(set={"st": "named_struct('a', 1, 'b', 'y')", "st.a": "2"}).execute()
    assert e.value.reason == "duplicate_column"


def test_a_failed_merge_leaves_the_table_as_it_was(lake, spark):
    t = lake.create_table("nn", "id long NOT NULL, v int")
    t.append(spark.sql("SELECT id, CAST(id AS INT) AS v FROM range(10)"))
    files = {f.path for f in t.snapshot.add_files}
    v = t.version
    # Fails inside the write job: a NULL into a NOT NULL column, a value past an int.
    with pytest.raises(Exception, match="NOT_NULL|NULL"):
        t.merge(src(spark, "SELECT CAST(NULL AS BIGINT) AS id, 1 AS v"), "target.id = source.id") \
            .when_not_matched_insert_all().execute()
    with pytest.raises(Exception, match="(?i)overflow|CAST"):
        t.merge(src(spark, "SELECT 3L AS id, 99999999999L AS v"), "target.id = source.id") \
            .when_matched_update(set={"v": "source.v"}).execute()
    after = skiplake.Table.open(spark, t.path)
    assert after.version == v and {f.path for f in after.snapshot.add_files} == files
    assert sorted(r.v for r in after.read().collect()) == list(range(10))


def test_pruning_reads_only_files_a_clause_can_act_on(table, spark):
    source = src(spark, "SELECT 15L AS id, 0L AS v, 'x' AS s")
    txn = table.merge(source, "target.id = source.id").when_matched_update_all().stage(table.begin())
    assert len(txn.read_set.files) == 1        # the source's key lies in file 10-19 only
    # NOT MATCHED BY SOURCE: also the files where its condition may hold; without one, all.
    txn = (table.merge(source, "target.id = source.id").when_matched_update_all()
           .when_not_matched_by_source_delete("target.id >= 25").stage(table.begin()))
    assert len(txn.read_set.files) == 2
    txn = table.merge(source, "target.id = source.id").when_not_matched_by_source_delete().stage(table.begin())
    assert len(txn.read_set.files) == 3


def test_insert_only_merge_writes_no_file_again(table, spark):
    v = table.version
    result = (table.merge(src(spark, "SELECT id, 1L AS v, 'i' AS s FROM range(25, 40)"), "target.id = source.id")
              .when_not_matched_insert_all().execute())
    assert not [a for a in actions(table, v + 1) if isinstance(a, RemoveFile)]
    assert result.num_target_rows_inserted == 10 and result.num_target_files_removed == 0
    assert table.read().count() == 40


def test_merge_where_no_target_file_can_match(lake, table, spark):
    """An empty table, and a source whose keys rule out every file: only inserts act, and the
    source's rows are still counted (a join with no target rows lets Spark skip the source)."""
    empty = lake.create_table("empty", "id long, v long, s string")
    source = src(spark, "SELECT id, id AS v, 'n' AS s FROM range(100, 105)")
    for t in (empty, table):
        before = t.read().count()
        result = (t.merge(source, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all()
                  .when_not_matched_by_source_delete("target.id < 0").execute())
        assert (result.num_source_rows, result.num_target_rows_inserted, result.num_target_files_removed) == (5, 5, 0)
        assert t.read().count() == before + 5
    result = table.merge(source, "target.id = source.id").when_matched_delete().execute()
    assert (result.num_source_rows, result.num_target_rows_deleted, result.num_output_rows) == (5, 5, 0)


def _without_stats(t) -> None:
    """Rewrite the table's commits as a writer that collects no stats writes them (Delta makes
    stats, numRecords among them, optional)."""
    for name in sorted(os.listdir(os.path.join(t.path, "_delta_log"))):
        if name.endswith(".json"):
            path = os.path.join(t.path, "_delta_log", name)
            lines = [json.loads(x) for x in open(path).read().splitlines() if x.strip()]
            for a in lines:
                a.get("add", {}).pop("stats", None)
            with open(path, "w") as f:
                f.write("".join(json.dumps(a) + "\n" for a in lines))


def test_metrics_are_counted_when_files_lack_row_counts(table, spark):
    _without_stats(table)
    table = skiplake.Table.open(spark, table.path)
    assert all(f.num_records is None for f in table.snapshot.add_files)
    result = (table.merge(src(spark, "SELECT id, -id AS v, 'b' AS s FROM range(25, 35)"), "target.id = source.id")
              .when_matched_update_all().when_not_matched_insert_all().execute())
    assert (result.num_target_rows_updated, result.num_target_rows_inserted, result.num_target_rows_copied) == (5, 5, 5)
    table.delete("id < 3")
    assert table.history(1)[0]["operationMetrics"]["numDeletedRows"] == "3"


def test_deletion_vectors_mark_rows_instead_of_rewriting(lake, spark):
    t = lake.create_table("dv", "id long, v long", properties={"delta.enableDeletionVectors": "true"})
    t.append(spark.sql("SELECT id, id AS v FROM range(0, 1000)").coalesce(1))
    t.append(spark.sql("SELECT id, id AS v FROM range(1000, 2000)").coalesce(1))
    files = {f.path for f in t.snapshot.add_files}
    source = spark.sql("SELECT id, -id AS v FROM range(990, 1010)")
    result = (t.merge(source, "target.id = source.id")
              .when_matched_update("source.id % 2 = 0", set={"v": "source.v"})
              .when_matched_delete()
              .when_not_matched_by_source_delete("target.id < 5")
              .execute())
    assert files <= {f.path for f in t.snapshot.add_files}          # the data files stay, marked
    assert sum(1 for f in t.snapshot.add_files if f.deletionVector) == 2
    got = {r.id: r.v for r in t.read().collect()}
    assert len(got) == 2000 - 10 - 5
    assert all(got[i] == -i for i in range(990, 1010, 2)) and 5 in got and 4 not in got
    assert (result.num_target_deletion_vectors_added, result.num_target_files_removed,
            result.num_target_rows_updated, result.num_target_rows_deleted) == (2, 0, 10, 15)
    assert result.num_target_rows_copied == 0
    # A file mostly changed is rewritten with the rows that stay, the changed rows (and those its
    # deletion vector marks) left out; so is one without a deletion vector yet.
    t.append(spark.sql("SELECT id, id AS v FROM range(2000, 2100)").coalesce(1))
    result = (t.merge(spark.sql("SELECT id FROM range(0, 900) UNION ALL SELECT id FROM range(2000, 2060)"),
                      "target.id = source.id")
              .when_matched_update(set={"v": "0"}).execute())
    assert result.num_target_files_removed == 2 and result.num_target_rows_copied == 90 + 40   # ids 900-989; 2060-2099
    assert result.num_target_rows_updated == 895 + 60 and result.num_target_rows_inserted == 0
    got = {r.id: r.v for r in t.read().collect()}
    assert len(got) == 2085 and all(got[i] == 0 for i in [*range(5, 900), *range(2000, 2060)])
    assert got[950] == 950 and got[2070] == 2070 and 995 not in got


def test_partition_and_bucket_columns_move_rows_where_they_belong(lake, spark):
    from tests.test_bucketing import check_bucket_files, new_files
    t = lake.create_table("pb", "id long, k int, p string", partition_by=["p"], bucket_by=BucketSpec(4, ["k"]))
    t.append(spark.sql("SELECT id, CAST(id % 7 AS INT) AS k, IF(id < 20, 'x', 'y') AS p FROM range(40)"))
    before = skiplake.Table.open(spark, t.path)
    (t.merge(spark.sql("SELECT id, 100 AS k FROM range(15, 25)"), "target.id = source.id")
     .when_matched_update(set={"k": "source.k", "p": "'z'"})
     .when_not_matched_by_source_update("target.id < 3", set={"k": "target.k + 50"})
     .when_not_matched_insert(values={"id": "source.id", "k": "source.k", "p": "'new'"}).execute())
    after = skiplake.Table.open(spark, t.path)
    assert check_bucket_files(spark, after, new_files(before, after)) > 0
    assert sorted(r.id for r in t.read("p = 'z'").collect()) == list(range(15, 25))
    assert t.read("k = 100").count() == 10 and t.read("k >= 50 AND k < 100").count() == 3


def test_column_mapping_table_with_renamed_column(lake, spark):
    t = lake.create_table("cm", "id long, v long", properties={"delta.columnMapping.mode": "name"})
    t.append(spark.sql("SELECT id, id AS v FROM range(10)"))
    t.rename_column("v", "value")
    (t.merge(spark.sql("SELECT id, -id AS value, 'n' AS extra FROM range(8, 12)"), "target.id = source.id")
     .when_matched_update_all().when_not_matched_insert_all()
     .when_not_matched_by_source_delete("target.value < 2").with_schema_evolution().execute())
    got = {r.id: (r.value, r.extra) for r in t.read().collect()}
    assert got == {**{i: (i, None) for i in range(2, 8)}, **{i: (-i, "n") for i in range(8, 12)}}
    logged = [a for a in actions(t, t.version) if isinstance(a, AddFile)]
    assert logged and all("value" not in (a.stats or "") for a in logged)   # stats under physical names


def test_disjoint_merges_both_commit_and_overlapping_ones_conflict(lake, spark):
    t = lake.create_table("c", "id long, v long", properties={"delta.enableDeletionVectors": "true"})
    t.append(spark.sql("SELECT id, 0L AS v FROM range(0, 200)").coalesce(1))

    def upsert(sql):
        return t.merge(spark.sql(sql), "target.id = source.id").when_matched_update_all() \
            .when_not_matched_insert_all()
    a = upsert("SELECT id, 1L AS v FROM range(10, 20)").stage(t.begin())
    b = upsert("SELECT id, 2L AS v FROM range(100, 110)").stage(t.begin())
    a.commit()
    b.commit()       # row-level: different rows of the same file
    got = {r.id: r.v for r in t.read().collect()}
    assert {i for i, v in got.items() if v == 1} == set(range(10, 20))
    assert {i for i, v in got.items() if v == 2} == set(range(100, 110))
    c = upsert("SELECT 50L AS id, 3L AS v").stage(t.begin())
    d = upsert("SELECT 50L AS id, 4L AS v").stage(t.begin())
    c.commit()
    with pytest.raises(ConcurrentDeleteDeleteException, match="row-level"):    # the same row
        d.commit()
    assert t.read("id = 50").first().v == 3


def test_keyword_form_keeps_returning_the_version(table, spark):
    v = table.merge(src(spark, "SELECT id, 0L AS v, 'k' AS s FROM range(28, 33)"), on="target.id = source.id",
                    when_matched_update="*", when_not_matched_insert="*")
    assert isinstance(v, int) and v == table.version
    assert table.read("s = 'k'").count() == 5
    # An unconditional delete leaves an update nothing to act on (as before): it deletes.
    table.merge(src(spark, "SELECT 28L AS id"), on="target.id = source.id", when_matched_delete=True,
                when_matched_update={"s": "'never'"})
    assert table.read("id = 28").count() == 0 and table.read("s = 'never'").count() == 0
    with pytest.raises(InvalidArgumentError, match="at least one"):
        table.merge(src(spark, "SELECT 1L AS id"), on="target.id = source.id", when_matched_delete=False,
                    when_matched_update_condition="source.id > 0")


def test_columns_are_accepted_as_conditions_and_values(table, spark):
    source = src(spark, "SELECT id, -id AS v FROM range(0, 4)")
    (table.merge(source, "target.id = source.id")
     .when_matched_update(F.col("source.id") > 1, set={"v": F.col("source.v") * 2}).execute())
    assert [r[1] for r in rows(table)[:4]] == [0, 10, -4, -6]
    params = table.history(1)[0]["operationParameters"]
    assert json.loads(params["matchedPredicates"])[0]["predicate"]


def test_cdc_upsert_with_deletes_as_documented(lake, spark):
    from pyspark.sql import Window
    customers = lake.create_table("customers", "id long, name string, email string, updated_at long")
    customers.append(spark.sql("SELECT id, concat('n', id) AS name, 'e' AS email, 0L AS updated_at FROM range(5)"))
    changes = spark.createDataFrame(
        [(1, "U", 1, "one", "x"), (1, "U", 2, "uno", "y"), (2, "D", 1, None, None), (3, "U", 1, "tres", "z"),
         (3, "D", 2, None, None), (7, "I", 1, "seven", "s"), (8, "I", 1, "eight", "e"), (8, "D", 2, None, None)],
        "id long, op string, ts long, name string, email string")
    latest = (changes
              .withColumn("n", F.row_number().over(Window.partitionBy("id").orderBy(F.col("ts").desc())))
              .where("n = 1").drop("n"))
    (customers.merge(latest, "target.id = source.id")
        .when_matched_delete(condition="source.op = 'D'")
        .when_matched_update(set={"name": "source.name", "email": "source.email", "updated_at": "source.ts"})
        .when_not_matched_insert(condition="source.op <> 'D'",
                                 values={"id": "source.id", "name": "source.name", "email": "source.email",
                                         "updated_at": "source.ts"})
        .execute())
    assert rows(customers, "id, name, email, updated_at") == [
        (0, "n0", "e", 0), (1, "uno", "y", 2), (4, "n4", "e", 0), (7, "seven", "s", 1)]


def test_scd_type_2_as_documented(lake, spark):
    customers = lake.create_table(
        "dim", "customer_id long, address string, current boolean, effective_date date, end_date date")
    customers.append(spark.sql(
        "SELECT 1L AS customer_id, 'old1' AS address, false AS current, DATE'2020-01-01' AS effective_date, "
        "DATE'2021-01-01' AS end_date UNION ALL "
        "SELECT 1L, 'a1', true, DATE'2021-01-01', NULL UNION ALL SELECT 2L, 'a2', true, DATE'2021-01-01', NULL"))
    updates = spark.sql("SELECT 1L AS customer_id, 'b1' AS address, DATE'2024-05-01' AS effective_date UNION ALL "
                        "SELECT 2L, 'a2', DATE'2024-05-01' UNION ALL SELECT 3L, 'a3', DATE'2024-05-01'")
    cur = customers.read("current = true")
    changed = (updates.alias("u").join(cur.alias("c"), "customer_id")
               .where("u.address <> c.address").select("u.*"))
    staged = (changed.selectExpr("CAST(NULL AS BIGINT) AS merge_key", "*")
              .unionByName(updates.selectExpr("customer_id AS merge_key", "*")))
    (customers.merge(staged, "target.customer_id = source.merge_key")
        .when_matched_update(condition="target.current = true AND target.address <> source.address",
                             set={"current": "false", "end_date": "source.effective_date"})
        .when_not_matched_insert(values={"customer_id": "source.customer_id", "address": "source.address",
                                         "current": "true", "effective_date": "source.effective_date",
                                         "end_date": "NULL"})
        .execute())
    got = [(r[0], r[1], r[2], str(r[3]), str(r[4])) for r in rows(
        customers, "customer_id, address, current, effective_date, end_date")]
    assert got == [(1, "a1", False, "2021-01-01", "2024-05-01"), (1, "b1", True, "2024-05-01", "None"),
                   (1, "old1", False, "2020-01-01", "2021-01-01"), (2, "a2", True, "2021-01-01", "None"),
                   (3, "a3", True, "2024-05-01", "None")]
