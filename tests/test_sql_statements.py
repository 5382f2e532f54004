"""Delta's SQL statements through lake.sql and lake.sql_script, on real tables: results with
delta-spark's columns, statements that change nothing when they fail, scripts that stop at the
first failure. Runs again under Spark Connect in the gate (the results are built there too)."""
from __future__ import annotations

import pytest

from skiplake.errors import (
    ConstraintViolationError,
    NotATableError,
    SqlScriptError,
    SqlStatementError,
    UnsupportedStatementError,
)

pytestmark = [pytest.mark.spark, pytest.mark.connect, pytest.mark.both_modes]


def rows(df):
    return sorted(tuple(r) for r in df.collect())


def test_ddl_dml_and_results(lake):
    assert lake.sql("CREATE TABLE t (id INT NOT NULL, v STRING COMMENT 'val', g INT) USING DELTA "
                    "PARTITIONED BY (g) TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')").columns == []
    lake.sql("INSERT INTO t VALUES (1, 'a', 0), (2, 'b', 1), (3, 'c', 0)")
    lake.sql("INSERT INTO t (id, g) SELECT 4, 1")
    assert rows(lake.sql("SELECT * FROM t")) == [(1, "a", 0), (2, "b", 1), (3, "c", 0), (4, None, 1)]
    upd = lake.sql("UPDATE t AS x SET v = 'z' WHERE x.id IN (SELECT 1 UNION SELECT 3)")
    assert upd.columns == ["num_affected_rows"] and rows(upd) == [(2,)]
    assert rows(lake.sql("DELETE FROM t WHERE id = 2")) == [(1,)]
    assert rows(lake.sql("DELETE FROM t WHERE id = 99")) == [(0,)]
    lake.spark.createDataFrame([(1, "m", 0), (9, "n", 1)], "id INT, v STRING, g INT").createOrReplaceTempView("src")
    m = lake.sql("MERGE INTO t USING src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET * "
                 "WHEN NOT MATCHED THEN INSERT * WHEN NOT MATCHED BY SOURCE AND t.id = 4 THEN DELETE")
    assert m.columns == ["num_affected_rows", "num_updated_rows", "num_deleted_rows", "num_inserted_rows"]
    assert rows(m) == [(3, 1, 1, 1)]
    assert rows(lake.sql("SELECT * FROM t")) == [(1, "m", 0), (3, "z", 0), (9, "n", 1)]
    # time travel in queries, pruned as lake tables are
    assert rows(lake.sql("SELECT id FROM t VERSION AS OF 1 WHERE g = 0")) == [(1,), (3,)]
    path = lake.path_of("t")
    assert rows(lake.sql(f"SELECT count(*) FROM delta.`{path}` AS d WHERE d.g = 1")) == [(1,)]
    history = lake.sql("DESCRIBE HISTORY t LIMIT 2")
    assert history.columns[:5] == ["version", "timestamp", "userId", "userName", "operation"]
    assert [r["operation"] for r in history.collect()] == ["MERGE", "DELETE"]


def test_alter_table_and_inspection(lake):
    lake.sql("CREATE TABLE a (id BIGINT, s STRING) USING DELTA TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    lake.sql("INSERT INTO a VALUES (1, 'x'), (2, 'y')")
    lake.sql("ALTER TABLE a ADD COLUMNS (w DOUBLE COMMENT 'weight')")
    lake.sql("ALTER TABLE a RENAME COLUMN s TO label")
    lake.sql("ALTER TABLE a DROP COLUMN w")
    lake.sql("ALTER TABLE a SET TBLPROPERTIES ('team' = 'sales')")
    props = dict(rows(lake.sql("SHOW TBLPROPERTIES a")))
    assert props["team"] == "sales" and props["delta.minWriterVersion"] == str(lake.table("a").snapshot.protocol.minWriterVersion)
    assert rows(lake.sql("SHOW TBLPROPERTIES a (team)")) == [("team", "sales")]
    lake.sql("ALTER TABLE a UNSET TBLPROPERTIES ('team')")
    assert "team" not in dict(rows(lake.sql("SHOW TBLPROPERTIES a")))
    lake.sql("ALTER TABLE a ADD CONSTRAINT pos CHECK (id > 0)")
    version = lake.table("a").version
    with pytest.raises(ConstraintViolationError):
        lake.sql("INSERT INTO a VALUES (-1, 'bad')")
    assert lake.table("a").version == version   # a failed statement commits nothing
    lake.sql("ALTER TABLE a DROP CONSTRAINT pos")
    assert lake.sql("SELECT * FROM a").columns == ["id", "label"]
    lake.sql("ALTER TABLE a CLUSTER BY (id)")
    detail = lake.sql("DESCRIBE DETAIL a").first()
    assert detail["clusteringColumns"] == ["id"] and detail["name"] == "a" and detail["numFiles"] >= 1
    lake.sql("ALTER TABLE a CLUSTER BY NONE")
    assert lake.sql("DESCRIBE DETAIL a").first()["clusteringColumns"] == []


def test_maintenance_statements(lake):
    lake.sql("CREATE TABLE m (k INT, v STRING) USING DELTA")
    for i in range(3):
        lake.sql(f"INSERT INTO m VALUES ({i}, 'v{i}')")
    out = lake.sql("OPTIMIZE m ZORDER BY (k)").first()
    assert out["path"] == lake.path_of("m")
    assert (out["metrics"]["numFilesRemoved"], out["metrics"]["numFilesAdded"]) == (3, 1)
    assert out["metrics"]["filesRemoved"]["totalFiles"] == 3
    restored = lake.sql("RESTORE TABLE m TO VERSION AS OF 2")
    assert restored.columns == ["table_size_after_restore", "num_of_files_after_restore", "num_removed_files",
                                "num_restored_files", "removed_files_size", "restored_files_size"]
    assert restored.first()["num_of_files_after_restore"] == 2
    assert rows(lake.sql("SELECT k FROM m")) == [(0,), (1,)]
    lake.spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        dry = lake.sql("VACUUM m RETAIN 0 HOURS DRY RUN")
        assert dry.columns == ["path"] and len(dry.collect()) == 2   # the OPTIMIZE's file, the third insert's
    finally:
        lake.spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "true")
    assert rows(lake.sql("VACUUM m")) == [(lake.path_of("m"),)]


def test_create_or_replace_and_drop(lake):
    lake.sql("CREATE TABLE r USING DELTA AS SELECT id, CAST(id AS STRING) AS s FROM range(5)")
    lake.sql("CREATE OR REPLACE TABLE r USING DELTA CLUSTER BY (id) AS SELECT id FROM range(2)")
    assert rows(lake.sql("SELECT * FROM r")) == [(0,), (1,)]
    assert rows(lake.sql("SELECT count(*) FROM r VERSION AS OF 1")) == [(5,)]
    assert lake.sql("CREATE TABLE IF NOT EXISTS r (x INT)").columns == []
    lake.sql("CREATE TABLE b (a INT, c INT) CLUSTERED BY (a) INTO 4 BUCKETS")
    assert lake.table("b").bucket_spec.num_buckets == 4
    lake.sql("INSERT OVERWRITE b SELECT id, id FROM r")
    lake.sql("INSERT INTO b REPLACE WHERE a = 1 SELECT 1, 100")
    assert rows(lake.sql("SELECT * FROM b")) == [(0, 0), (1, 100)]
    lake.sql("DROP TABLE b")
    assert "b" not in lake.tables()
    lake.sql("DROP TABLE IF EXISTS b")
    with pytest.raises(NotATableError):
        lake.sql("DROP TABLE b")


def test_bad_statements_are_typed_and_change_nothing(lake):
    lake.sql("CREATE TABLE e (id INT) USING DELTA")
    with pytest.raises(SqlStatementError) as e:
        lake.sql("MERGE INTO e USING (SELECT 1 AS id) s ON e.id = s.id WHEN MATCHED THEN")
    assert "line 1" in str(e.value)
    with pytest.raises(UnsupportedStatementError):
        lake.sql("CREATE TABLE p (a INT) USING parquet")
    with pytest.raises(UnsupportedStatementError, match="MERGE"):
        lake.sql("DELETE FROM e WHERE EXISTS (SELECT 1 FROM range(3) r WHERE r.id = e.id)")
    with pytest.raises(NotATableError):
        lake.sql("UPDATE nowhere SET id = 1")
    assert lake.table("e").version == 0


def test_scripts_stop_at_the_first_failure(lake):
    script = """
        CREATE TABLE s (id INT, v STRING) USING DELTA;
        INSERT INTO s VALUES (1, 'a;b'), (2, 'c');  -- a comment; with a semicolon
        /* block ; comment */
        UPDATE s SET v = 'x' WHERE id = 2;
        UPDATE s SET nope = 1;
        DELETE FROM s;
    """
    with pytest.raises(SqlScriptError) as e:
        lake.sql_script(script)
    assert e.value.number == 4 and e.value.line == 6 and "nope" in str(e.value)
    assert rows(lake.sql("SELECT * FROM s")) == [(1, "a;b"), (2, "x")]
    results = lake.sql_script("DELETE FROM s WHERE id = 1; SELECT count(*) AS n FROM s")
    assert [rows(r) for r in results] == [[(1,)], [(1,)]]


def test_collated_strings(lake):
    lake.sql("CREATE TABLE c (id INT, s STRING COLLATE UTF8_LCASE, u STRING COLLATE UNICODE_CI) USING DELTA")
    for row in ("(1, 'Abc', 'Zed')", "(2, 'abc', 'zed')", "(3, 'x', 'y')"):
        lake.sql(f"INSERT INTO c VALUES {row}")   # one file each: stats would tell them apart
    table = lake.table("c")
    assert "collations-preview" in table.snapshot.protocol.writerFeatures
    assert table.schema["s"].dataType.collation == "UTF8_LCASE"
    # A case-blind match reads every file that may hold one: binary min/max cannot rule a file out.
    assert rows(lake.sql("SELECT id FROM c WHERE s = 'ABC'")) == [(1,), (2,)]
    assert rows(lake.sql("SELECT id FROM c WHERE u = 'ZED'")) == [(1,), (2,)]
    assert rows(lake.sql("DELETE FROM c WHERE s = 'aBC'")) == [(2,)]
    assert rows(lake.sql("SELECT id FROM c")) == [(3,)]


def test_names_paths_time_travel_and_conversion(lake, spark, tmp_path):
    lake.sql("CREATE TABLE h (id BIGINT, v STRING) USING DELTA TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    lake.sql("INSERT INTO h VALUES (1, 'a'), (2, 'b')")
    first = lake.table("h").history(limit=1)[0]["timestamp"]
    lake.sql("UPDATE h SET v = 'z' WHERE id = 2")
    changes = lake.sql("SELECT id, v, _change_type FROM table_changes('h', 2) ORDER BY id, _change_type")
    assert sorted(tuple(r) for r in changes.collect()) == [(2, "b", "update_preimage"), (2, "z", "update_postimage")]
    import datetime as dt
    at = dt.datetime.fromtimestamp(first / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert rows(lake.sql(f"SELECT * FROM h TIMESTAMP AS OF '{at}'")) == [(1, "a"), (2, "b")]
    lake.sql(f"RESTORE TABLE h TO TIMESTAMP AS OF '{at}'")
    assert rows(lake.sql("SELECT * FROM h")) == [(1, "a"), (2, "b")]
    # a table at a path, and INSERT BY NAME / CTAS from it
    path = str(tmp_path / "by_path")
    lake.sql(f"CREATE TABLE delta.`{path}` (v STRING, id BIGINT) USING DELTA")
    lake.sql(f"INSERT INTO delta.`{path}` BY NAME SELECT id, v FROM h")
    assert rows(lake.sql(f"SELECT id, v FROM delta.`{path}`")) == [(1, "a"), (2, "b")]
    lake.sql(f"CREATE TABLE copy USING DELTA AS SELECT * FROM delta.`{path}` WHERE id > 1")
    assert rows(lake.sql("SELECT * FROM copy")) == [("b", 2)]
    # CONVERT TO DELTA, in place
    folder = str(tmp_path / "plain")
    spark.range(6).selectExpr("id", "CAST(id % 2 AS INT) AS p").write.partitionBy("p").parquet(folder)
    assert lake.sql(f"CONVERT TO DELTA parquet.`{folder}` PARTITIONED BY (p INT)").columns == []
    assert rows(lake.sql(f"SELECT count(*) FROM delta.`{folder}` WHERE p = 1")) == [(3,)]


@pytest.mark.connect
def test_catalog_tables(spark, tmp_path):
    import skiplake
    from skiplake.catalog.service import GlueCatalog
    catalog = GlueCatalog(f"sqlite:///{tmp_path / 'catalog.db'}")
    catalog.create_database(DatabaseInput={"Name": "sales"})
    lake = skiplake.Lake(spark, str(tmp_path / "root"), catalog=catalog, database="sales")
    external = str(tmp_path / "elsewhere" / "orders")
    lake.sql(f"CREATE TABLE sales.orders (id BIGINT, amount DOUBLE) USING DELTA LOCATION '{external}'")
    lake.sql("INSERT INTO sales.orders VALUES (1, 10.0), (2, 20.0)")
    assert rows(lake.sql("UPDATE orders SET amount = amount + 1 WHERE id = 2")) == [(1,)]
    assert rows(lake.sql("SELECT * FROM orders")) == [(1, 10.0), (2, 21.0)]
    latest = lake.table("orders")
    before = lake.table("sales.orders", version=latest.version - 1)   # the catalog's table, in time
    assert before.version == latest.version - 1
    assert sorted(map(tuple, before.read().collect())) == [(1, 10.0), (2, 20.0)]
    lake.sql("DROP TABLE sales.orders")
    with pytest.raises(NotATableError):
        lake.sql("SELECT * FROM orders")
    import os
    assert os.path.isdir(os.path.join(external, "_delta_log"))   # an external table keeps its files


def test_subqueries_read_lake_tables_and_leave_no_views(lake, spark):
    lake.sql("CREATE TABLE facts (id INT) USING DELTA")
    lake.sql("INSERT INTO facts SELECT id FROM range(1, 6)")
    lake.sql("CREATE TABLE doomed (id INT) USING DELTA")
    lake.sql("INSERT INTO doomed VALUES (2), (3)")
    assert rows(lake.sql("DELETE FROM facts WHERE id IN (SELECT id FROM doomed)")) == [(2,)]
    assert not spark.catalog.tableExists("doomed")   # the view made for the subquery is gone
    spark.createDataFrame([(5,)], "id INT").createOrReplaceTempView("doomed")
    try:  # a session's own view of that name is what Spark reads, and it stays
        assert rows(lake.sql("DELETE FROM facts WHERE id IN (SELECT id FROM doomed)")) == [(1,)]
        assert spark.catalog.tableExists("doomed")
    finally:
        spark.catalog.dropTempView("doomed")
    assert rows(lake.sql("SELECT * FROM facts")) == [(1,), (4,)]


def test_dynamic_partition_overwrite_is_refused_not_widened(lake, spark):
    lake.sql("CREATE TABLE parts (id INT, p INT) USING DELTA PARTITIONED BY (p)")
    lake.sql("INSERT INTO parts VALUES (1, 0), (2, 1)")
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        with pytest.raises(UnsupportedStatementError, match="REPLACE WHERE"):
            lake.sql("INSERT OVERWRITE parts VALUES (3, 1)")
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
    lake.sql("INSERT INTO parts REPLACE WHERE p = 1 VALUES (3, 1)")
    assert rows(lake.sql("SELECT * FROM parts")) == [(1, 0), (3, 1)]


def test_statements_on_sparks_own_tables_go_to_spark(lake, spark, tmp_path):
    lake.sql("CREATE TABLE src_rows (id INT) USING DELTA")
    lake.sql("INSERT INTO src_rows VALUES (1), (2)")
    spark.sql(f"CREATE TABLE plain_parquet (id INT) USING parquet LOCATION '{tmp_path / 'plain'}'")
    try:
        lake.sql("INSERT INTO plain_parquet SELECT id FROM src_rows")   # Spark's table, a lake table read
        assert rows(spark.table("plain_parquet")) == [(1,), (2,)]
    finally:
        spark.sql("DROP TABLE plain_parquet")
