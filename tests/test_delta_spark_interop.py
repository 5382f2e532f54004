"""delta-spark (the reference Delta Lake implementation) reads and writes skiplake tables.

The suite's SparkSession has no Delta jars, so delta-spark runs in a subprocess with its own JVM
(testing_support/delta_spark.py), one for the whole test session. The module fixture builds every
skiplake table first (while that JVM starts, if this module is its first user), hands delta-spark
one batch of jobs (reads at the latest version and at older versions, an append and a DELETE,
the isolation-level probe, ...), acts on what it wrote, hands it a second batch, and the tests
then compare.

The package comes from Maven Central through `spark.jars.packages` (Ivy cache: Spark's default,
or $SKIPLAKE_IVY_DIR). When it cannot be resolved the module is skipped. The coordinate can be
overridden with $SKIPLAKE_DELTA_SPARK_PACKAGE. delta-spark 4.4.x publishes one artifact per Spark
minor: `delta-spark_4.1_2.13` is built against Spark 4.1 (plain `delta-spark_2.13:4.4.0` is built
against Spark 4.2), and 4.4.1 is on PyPI only, not on Maven Central.

Rows cross the process boundary as strings cast by Spark in UTC on both sides (see
`rows_as_strings`), so timestamps with microseconds, decimals and doubles compare exactly.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from skiplake.log.actions import AddFile
from skiplake.log.snapshot import log_storage, read_commit
from testing_support.delta_spark import DeltaSpark, reader, rows_as_strings

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCHEMA = ("id BIGINT, qty INT, price DOUBLE, amount DECIMAL(7,2), name STRING, d DATE, "
          "ts TIMESTAMP, flag BOOLEAN, region STRING")
COLUMNS = ["id", "qty", "price", "amount", "name", "d", "ts", "flag", "region"]
TYPES = ["BIGINT", "INT", "DOUBLE", "DECIMAL(7,2)", "STRING", "DATE", "TIMESTAMP", "BOOLEAN", "STRING"]
PARTITION_BY = ["d", "region"]
DATES = ["2024-01-01", "2024-01-02", "2024-02-29"]
REGIONS = ["north", "south east", "ação", None]   # a space, non-ASCII and NULL as partition values
NAMES = ["alpha", "Bravo", "名前", "", None, "o'neil"]


def _row(i: int) -> tuple:
    """Row i of the test data as SQL literals' text (None for NULL); deterministic."""
    return (
        str(i),
        None if i % 11 == 5 else str((i * 7) % 23),
        None if i % 13 == 6 else repr([1.5, -0.25, 1e300, 3.0, 2.0 / 3.0][i % 5] * (i + 1)),
        None if i % 17 == 8 else f"{((i * 7919) % 1999999) / 100 - 9999.99:.2f}",
        NAMES[i % len(NAMES)],
        DATES[i % len(DATES)],
        f"2024-0{1 + i % 9}-1{i % 10} {i % 24:02d}:{(i * 7) % 60:02d}:{(i * 13) % 60:02d}.{(i * 104729) % 1000000:06d}",
        None if i % 19 == 9 else ("true" if i % 3 else "false"),
        REGIONS[(i // 3) % len(REGIONS)],
    )


def _frame(spark, ids):
    """A DataFrame of rows `ids` in SCHEMA, cast by Spark (UTC) from text."""
    from pyspark.sql import functions as F
    raw = spark.createDataFrame([_row(i) for i in ids], ", ".join(f"{c} STRING" for c in COLUMNS))
    return raw.select(*[F.col(c).cast(t).alias(c) for c, t in zip(COLUMNS, TYPES)])


def _select_sql(ids) -> str:
    """The same rows as a SELECT delta-spark can run."""
    def lit(v):
        return "NULL" if v is None else "'" + v.replace("'", "''") + "'"
    values = ", ".join("(" + ", ".join(lit(v) for v in _row(i)) + ")" for i in ids)
    casts = ", ".join(f"CAST({c} AS {t}) AS {c}" for c, t in zip(COLUMNS, TYPES))
    return f"SELECT {casts} FROM VALUES {values} AS v({', '.join(COLUMNS)})"


@dataclass
class Interop:
    lake: object
    result: dict
    versions: dict[str, int] = field(default_factory=dict)   # main table: step -> version
    written_before: list = field(default_factory=list)         # "written" table rows before delta-spark
    written_ids: list = field(default_factory=list)
    create_error: str | None = None                            # "wser" table: create_table error, if any
    dv_expected: list = field(default_factory=list)            # "dv_ours" rows, as skiplake reads them
    cm_expected: list = field(default_factory=list)            # "cm_ours" rows, as skiplake reads them
    features_expected: dict = field(default_factory=dict)      # skiplake's feature tables: name -> rows
    cdf_expected: dict = field(default_factory=dict)           # skiplake's change feed tables: name -> changes
    clustering: dict = field(default_factory=dict)             # what skiplake saw between the two batches
    second: dict = field(default_factory=dict)                 # delta-spark's second batch of jobs

    def job(self, job_id: str) -> dict:
        jobs = self.result["jobs"]
        return jobs[job_id] if job_id in jobs else self.second["jobs"][job_id]


DELETE_WHERE_DS = "qty > 15 OR region = 'south east'"   # the DELETE delta-spark runs on "written"
# Versions delta-spark reads with versionAsOf: every kind of commit; append5 is version 10 (read
# through the Parquet checkpoint), delete_after_checkpoint is 11 (checkpoint + one JSON commit).
TIME_TRAVEL_STEPS = ["append1", "delete", "update", "update_partition", "merge", "optimize", "append5",
                     "delete_after_checkpoint"]


def _build_main(spark, lake) -> dict[str, int]:
    """The main table through every kind of commit, past a checkpoint at version 10."""
    t = lake.create_table("main", SCHEMA, partition_by=PARTITION_BY)
    v = {"create": t.version}
    v["append1"] = t.append(_frame(spark, range(0, 40)))
    v["append2"] = t.append(_frame(spark, range(40, 80)))
    v["append3"] = t.append(_frame(spark, range(80, 120)))
    v["delete"] = t.delete("qty > 18 OR (d = DATE'2024-01-02' AND flag)")
    v["update"] = t.update("region = 'north' OR name IS NULL",
                           {"price": "price * 2", "name": "upper(name)", "amount": "amount - 1.5"})
    v["update_partition"] = t.update("id % 10 = 3", {"region": "'west'", "d": "DATE'2023-12-31'"})
    v["append4"] = t.append(_frame(spark, range(120, 150)))
    src = _frame(spark, range(100, 170)).selectExpr(
        "id", "qty + 1 AS qty", "price", "amount", "concat('m-', coalesce(name, '')) AS name", "d", "ts",
        "NOT flag AS flag", "region")
    v["merge"] = t.merge(src, "target.id = source.id", when_matched_update="*",
                         when_matched_delete="source.id % 9 = 0", when_not_matched_insert="*")
    v["optimize"] = t.optimize().version
    v["append5"] = t.append(_frame(spark, range(170, 200)))
    v["delete_after_checkpoint"] = t.delete("ts < TIMESTAMP'2024-02-01 00:00:00'")
    v["update_after_checkpoint"] = t.update("flag IS NULL", {"flag": "true", "ts": "ts + INTERVAL 1 SECOND"})
    v["append6"] = t.append(_frame(spark, range(200, 215)))
    return v


@pytest.fixture(scope="module")
def interop(spark, delta_spark, tmp_path_factory):
    import skiplake
    root = tmp_path_factory.mktemp("delta_spark_interop")
    lake = skiplake.Lake(spark, str(root / "warehouse"))
    return _run_interop(spark, lake, delta_spark)


def _run_interop(spark, lake, delta: DeltaSpark) -> Interop:
    t0 = time.time()
    versions = _build_main(spark, lake)
    delta.check()

    # "written": delta-spark appends and deletes. checkpointInterval=3 makes delta-spark's append
    # (version 3) write a checkpoint that skiplake must then read.
    w = lake.create_table("written", SCHEMA, partition_by=PARTITION_BY,
                          properties={"delta.checkpointInterval": "3"})
    w.append(_frame(spark, range(0, 20)))
    w.append(_frame(spark, range(20, 40)))
    written_before = rows_as_strings(w.read(), COLUMNS)
    written_ids = list(range(1000, 1012))

    # "wser": metaData.configuration has delta.isolationLevel = WriteSerializable.
    create_error = None
    try:
        ws = lake.create_table("wser", SCHEMA, partition_by=PARTITION_BY,
                               properties={"delta.isolationLevel": "WriteSerializable"})
        ws.append(_frame(spark, range(0, 10)))
    except Exception as e:  # recorded; test 4 asserts on it
        create_error = f"{type(e).__name__}: {e}"

    # "wser_alter": no isolation level; delta-spark is asked to SET it to WriteSerializable.
    wa = lake.create_table("wser_alter", SCHEMA, partition_by=PARTITION_BY)
    wa.append(_frame(spark, range(0, 5)))
    # "dv_ours": skiplake writes deletion vectors (DELETE twice, UPDATE, MERGE) for delta-spark to read.
    dv = lake.create_table(DV_OURS, SCHEMA, partition_by=PARTITION_BY,
                           properties={"delta.enableDeletionVectors": "true"})
    dv.append(_frame(spark, range(0, 120)).repartition(2))
    dv.delete("qty > 15")
    dv.delete("id % 5 = 0")
    dv.update("id % 7 = 1", {"name": "'upd'"})
    dv.merge(_frame(spark, range(100, 130)), "target.id = source.id", when_matched_delete="source.id % 2 = 0",
             when_matched_update={"name": "'merged'"}, when_not_matched_insert="*")
    dv_expected = rows_as_strings(dv.read(), COLUMNS)
    cm_expected = _build_column_mapped(spark, lake)
    features_expected = _build_feature_tables(spark, lake)
    cdf_expected = _build_change_feed_tables(spark, lake)
    _build_constraint_table(spark, lake)
    _build_clustered_table(spark, lake)
    _build_row_tracking_table(spark, lake)
    built = time.time() - t0

    main, written, wser, wser_alter = (lake.path_of(n) for n in ("main", "written", "wser", "wser_alter"))
    jobs = [{"id": "main", "op": "read", "path": main, "columns": COLUMNS}]
    jobs += [{"id": f"main@{s}", "op": "read", "path": main, "version": versions[s], "columns": COLUMNS}
             for s in TIME_TRAVEL_STEPS]
    jobs += [
        {"id": "written:append", "op": "append", "path": written, "sql": _select_sql(written_ids)},
        {"id": "written@append", "op": "read", "path": written, "columns": COLUMNS},
        {"id": "written:delete", "op": "sql",
         "sql": f"DELETE FROM {reader._quote_path(written)} WHERE {DELETE_WHERE_DS}"},
        {"id": "written@delete", "op": "read", "path": written, "columns": COLUMNS},
    ]
    if create_error is None:
        jobs += [
            {"id": "wser:read", "op": "read", "path": wser, "columns": COLUMNS},
            {"id": "wser:append", "op": "append", "path": wser, "sql": _select_sql(range(500, 505))},
            {"id": "wser:read_after", "op": "read", "path": wser, "columns": COLUMNS},
        ]
    jobs += [{"id": "wser_alter:set", "op": "sql",
              "sql": f"ALTER TABLE {reader._quote_path(wser_alter)} "
                     "SET TBLPROPERTIES ('delta.isolationLevel' = 'WriteSerializable')"}]
    jobs += _deletion_vector_jobs(os.path.join(lake.root, DV_TABLE), os.path.join(lake.root, DV_PART_TABLE))
    jobs += [{"id": "dv_ours:read", "op": "read", "path": lake.path_of(DV_OURS), "columns": COLUMNS}]
    jobs += _column_mapping_jobs(lake)
    jobs += [{"id": "cm_ours:read", "op": "read", "path": lake.path_of(CM_OURS), "columns": CM_OURS_COLUMNS}]
    jobs += _feature_jobs(lake)
    jobs += _change_feed_jobs(lake)
    jobs += _constraint_jobs(lake)
    jobs += _clustering_jobs(lake)
    jobs += _row_tracking_jobs(lake)

    t1 = time.time()
    result = delta.run_batch(jobs)
    # skiplake acts on what delta-spark wrote, then delta-spark reads and writes the result.
    clustering = {**_cluster_between_batches(spark, lake, result), **_row_ids_between_batches(spark, lake, result)}
    second = delta.run_batch(_second_clustering_jobs(lake) + _second_row_tracking_jobs(lake))
    print(f"\nskiplake tables built in {built:.1f}s; delta-spark {result.get('delta_version')} on Spark "
          f"{result.get('spark_version')}: session start {result.get('startup_seconds')}s, jobs "
          f"{time.time() - t1:.1f}s (" + ", ".join(f"{k} {j['seconds']}s" for k, j in result["jobs"].items()) + ")")
    return Interop(lake, result, versions, written_before, written_ids, create_error, dv_expected,
                   cm_expected, features_expected, cdf_expected, clustering, second)


CM_OURS = "cm_ours"
CM_OURS_COLUMNS = ["id", "grp", "label", "st"]


def _build_column_mapped(spark, lake) -> list:
    """skiplake's own table with column mapping (name mode) and deletion vectors, through every
    kind of write: appends, DELETE, UPDATE, MERGE, a partition column and a column renamed, a
    column dropped, a column added, OPTIMIZE of one partition. Its rows as skiplake reads them."""
    t = lake.create_table(CM_OURS, "id long, g int, s string, x int, st struct<a: int, b: string>", partition_by=["g"],
                          properties={"delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "true",
                                      "delta.checkpointInterval": "4"})  # checkpoints after DML, renames
    t.append(spark.sql("SELECT id, CAST(id % 3 AS INT) AS g, concat('s', id) AS s, 1 AS x, "
                       "named_struct('a', CAST(id % 10 AS INT), 'b', concat('b', id)) AS st FROM range(0, 300)")
             .repartition(2))
    t.delete("id % 7 = 0")
    t.update("id % 5 = 1", {"s": "upper(s)"})
    t.merge(spark.sql("SELECT id, CAST(id % 3 AS INT) AS g, 'm' AS s, 2 AS x, named_struct('a', 0, 'b', 'm') AS st "
                      "FROM range(290, 310)"), "target.id = source.id",
            when_matched_update={"s": "source.s"}, when_not_matched_insert="*")
    t.rename_column("s", "label")
    t.rename_column("g", "grp")
    t.drop_columns("x")
    t.append(spark.sql("SELECT 1000L AS id, 1 AS grp, 'late' AS label, named_struct('a', 1, 'b', 'l') AS st"))
    t.optimize("grp = 2")
    assert os.path.exists(os.path.join(t.path, "_delta_log", "00000000000000000008.checkpoint.parquet"))
    return rows_as_strings(t.read(), CM_OURS_COLUMNS)


DV_TABLE, DV_PART_TABLE, DV_OURS = "dv_spark", "dv_spark_parted", "dv_ours"
# delta-spark's DML on its own tables with deletion vectors on: each DELETE marks rows (a DV
# per touched file, the second one the union with the first), UPDATE marks the old rows and
# writes new ones; checkpointInterval=2 makes it write checkpoints whose add structs hold DVs.
DV_STEPS = ("create", "insert", "delete1", "delete2", "update")


def _deletion_vector_jobs(path: str, parted: str) -> list[dict]:
    jobs = []
    for p, partition in ((path, ""), (parted, "PARTITIONED BY (g)")):
        q = reader._quote_path(p)
        sql = {
            "create": f"CREATE TABLE {q} (id BIGINT, g INT, s STRING, x DECIMAL(9,2)) USING delta {partition} "
                      "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.checkpointInterval' = '2')",
            "insert": f"INSERT INTO {q} SELECT /*+ REPARTITION(3) */ id, CAST(id % 4 AS INT), concat('s', id), "
                      "CAST(id / 7 AS DECIMAL(9,2)) FROM range(0, 3000)",
            "delete1": f"DELETE FROM {q} WHERE id % 7 = 0",
            "delete2": f"DELETE FROM {q} WHERE id % 11 = 0 OR s = 's5'",
            "update": f"UPDATE {q} SET s = concat('u', s), x = x + 1 WHERE id % 13 = 0",
        }
        jobs += [{"id": f"{p}:{step}", "op": "sql", "sql": sql[step]} for step in DV_STEPS]
        jobs.append({"id": f"{p}:read", "op": "read", "path": p, "columns": ["id", "g", "s", "x"]})
    return jobs


CM_TABLES = {"cm_name": "name", "cm_id": "id"}
CM_COLUMNS = ["id", "g", "s2", "st"]


def _column_mapping_jobs(lake) -> list[dict]:
    """delta-spark's tables with column mapping (name and id modes) and deletion vectors: a
    partition column, a struct, a renamed and a dropped column, rows written before and after."""
    jobs = []
    for name, mode in CM_TABLES.items():
        q = reader._quote_path(os.path.join(lake.root, name))
        steps = [
            f"CREATE TABLE {q} (id BIGINT, g INT, s STRING, x INT, st STRUCT<a: INT, b: STRING>) USING delta "
            f"PARTITIONED BY (g) TBLPROPERTIES ('delta.columnMapping.mode' = '{mode}', "
            "'delta.enableDeletionVectors' = 'true', 'delta.checkpointInterval' = '3')",
            f"INSERT INTO {q} SELECT /*+ REPARTITION(2) */ id, CAST(id % 3 AS INT), concat('s', id), 1, "
            "named_struct('a', CAST(id % 10 AS INT), 'b', concat('b', id)) FROM range(0, 600)",
            f"ALTER TABLE {q} RENAME COLUMN s TO s2",
            f"ALTER TABLE {q} DROP COLUMN x",
            f"DELETE FROM {q} WHERE id % 7 = 0",
            f"INSERT INTO {q} SELECT id, CAST(id % 3 AS INT), concat('n', id), "
            "named_struct('a', CAST(id % 10 AS INT), 'b', concat('b', id)) FROM range(600, 700)",
        ]
        jobs += [{"id": f"{name}:{i}", "op": "sql", "sql": sql} for i, sql in enumerate(steps)]
        jobs.append({"id": f"{name}:read", "op": "read", "path": os.path.join(lake.root, name), "columns": CM_COLUMNS})
    return jobs


# Tables with the reader-writer features other writers use: V2 checkpoints (Parquet and JSON,
# with sidecars), type widening, VARIANT (plain and shredded). delta-spark writes each; skiplake
# writes a V2-checkpointed and a VARIANT table of its own.
V2_SPARK, V2_JSON_SPARK, TW_SPARK, VARIANT_SPARK, SHRED_SPARK = (
    "v2ck_spark", "v2ck_json_spark", "tw_spark", "variant_spark", "shred_spark")
V2_OURS, VARIANT_OURS = "v2ck_ours", "variant_ours"
TW_COLUMNS = ["a", "f", "d", "dt", "b", "s"]
V_COLUMNS = ["id", "v"]
_TOP_LEVEL_FORMAT = "spark.databricks.delta.checkpointV2.topLevelFileFormat"


def _build_feature_tables(spark, lake) -> dict[str, list]:
    v2 = lake.create_table(V2_OURS, "id long, g int, s string", partition_by=["g"],
                           properties={"delta.checkpointPolicy": "v2", "delta.checkpointInterval": "2",
                                       "delta.enableDeletionVectors": "true"})
    for lo in (0, 100, 200):
        v2.append(spark.sql(f"SELECT id, CAST(id % 3 AS INT) AS g, concat('s', id) AS s FROM range({lo}, {lo + 100})"))
    v2.delete("id % 7 = 0")
    var = lake.create_table(VARIANT_OURS, "id long, v variant")
    var.append(spark.sql("SELECT id, parse_json(concat('{\"k\":', id, ',\"a\":[1,\"x\"]}')) AS v FROM range(0, 20)"))
    var.delete("id % 4 = 0")
    return {V2_OURS: rows_as_strings(v2.read(), ["id", "g", "s"]), VARIANT_OURS: rows_as_strings(var.read(), V_COLUMNS)}


def _feature_jobs(lake) -> list[dict]:
    def q(name: str) -> str:
        return reader._quote_path(os.path.join(lake.root, name))
    steps: list[str] = []
    for name, fmt in ((V2_SPARK, "parquet"), (V2_JSON_SPARK, "json")):
        steps += [
            f"SET {_TOP_LEVEL_FORMAT} = {fmt}",
            f"CREATE TABLE {q(name)} (id BIGINT, g INT, s STRING) USING delta PARTITIONED BY (g) TBLPROPERTIES "
            "('delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '2', 'delta.enableDeletionVectors' = 'true')",
            *[f"INSERT INTO {q(name)} SELECT id, CAST(id % 3 AS INT), concat('s', id) FROM range({lo}, {lo + 100})"
              for lo in (0, 100, 200)],
            f"DELETE FROM {q(name)} WHERE id % 7 = 0",
        ]
    steps += [
        f"SET {_TOP_LEVEL_FORMAT} = parquet",
        f"CREATE TABLE {q(TW_SPARK)} (a INT, f FLOAT, d DECIMAL(5,2), dt DATE, b TINYINT, s STRING) USING delta "
        "TBLPROPERTIES ('delta.enableTypeWidening' = 'true')",
        f"INSERT INTO {q(TW_SPARK)} SELECT CAST(id AS INT), CAST(id / 10 + 3.3 AS FLOAT), CAST(id / 4 AS DECIMAL(5,2)), "
        "date_add(DATE'2024-01-01', CAST(id AS INT)), CAST(id AS TINYINT), concat('old', id) FROM range(0, 12)",
        f"ALTER TABLE {q(TW_SPARK)} ALTER COLUMN a TYPE BIGINT",
        f"ALTER TABLE {q(TW_SPARK)} ALTER COLUMN f TYPE DOUBLE",
        f"ALTER TABLE {q(TW_SPARK)} ALTER COLUMN d TYPE DECIMAL(10,4)",
        f"ALTER TABLE {q(TW_SPARK)} ALTER COLUMN b TYPE INT",
        f"INSERT INTO {q(TW_SPARK)} SELECT 5000000000 + id, id / 7.0, CAST(123456.1234 + id AS DECIMAL(10,4)), "
        "date_add(DATE'2025-01-01', CAST(id AS INT)), 100000 + CAST(id AS INT), concat('new', id) FROM range(0, 8)",
        f"CREATE TABLE {q(VARIANT_SPARK)} (id BIGINT, v VARIANT) USING delta",
        f"INSERT INTO {q(VARIANT_SPARK)} SELECT id, parse_json(concat('{{\"k\":', id, ',\"n\":{{\"x\":\"', id, "
        "'\"}}}}')) FROM range(0, 30)",
        f"CREATE TABLE {q(SHRED_SPARK)} (id BIGINT, v VARIANT) USING delta "
        "TBLPROPERTIES ('delta.enableVariantShredding' = 'true')",
        f"INSERT INTO {q(SHRED_SPARK)} SELECT id, parse_json(concat('{{\"k\":', id, ',\"t\":\"x', id, '\"}}')) "
        "FROM range(0, 30)",
    ]
    jobs = [{"id": f"features:{i}", "op": "sql", "sql": sql} for i, sql in enumerate(steps)]
    jobs += [{"id": f"{name}:read", "op": "read", "path": os.path.join(lake.root, name), "columns": cols}
             for name, cols in ((V2_SPARK, ["id", "g", "s"]), (V2_JSON_SPARK, ["id", "g", "s"]),
                                (TW_SPARK, TW_COLUMNS), (VARIANT_SPARK, V_COLUMNS), (SHRED_SPARK, V_COLUMNS),
                                (V2_OURS, ["id", "g", "s"]), (VARIANT_OURS, V_COLUMNS))]
    return jobs


CDF_OURS, CDF_OURS_DV, CDF_SPARK = "cdf_ours", "cdf_ours_dv", "cdf_spark"
CDF_COLUMNS = ["id", "part", "qty", "_change_type", "_commit_version", "_commit_ms"]
CDF_SCHEMA = "id long, part string, qty int"


def _cdf_rows(spark, lo: int, hi: int):
    return spark.sql(f"SELECT id, concat('p', CAST(id % 3 AS STRING)) AS part, CAST(id % 10 AS INT) AS qty "
                     f"FROM range({lo}, {hi})")


def _changes_as_strings(df) -> list[tuple]:
    return rows_as_strings(df.selectExpr("*", "unix_millis(_commit_timestamp) AS _commit_ms"), CDF_COLUMNS)


def _build_change_feed_tables(spark, lake) -> dict[str, list]:
    """Tables with the change data feed, through every DML, for delta-spark's table_changes."""
    out = {}
    for name, properties, parts in ((CDF_OURS, {}, None), (CDF_OURS_DV, {"delta.enableDeletionVectors": "true"},
                                                           ["part"])):
        t = lake.create_table(name, CDF_SCHEMA, partition_by=parts,
                              properties={"delta.enableChangeDataFeed": "true", **properties})
        t.append(_cdf_rows(spark, 0, 60).repartition(3))
        t.delete("id % 7 = 0")
        t.update("qty < 3", {"qty": "qty + 100"})
        t.delete("id >= 50")
        src = _cdf_rows(spark, 40, 80).selectExpr("id", "part", "CAST(qty * 2 AS INT) AS qty")
        (t.merge(src, "target.id = source.id").when_matched_delete("source.id % 4 = 0").when_matched_update_all()
         .when_not_matched_insert_all().execute())
        t.overwrite(_cdf_rows(spark, 1000, 1010), where="id >= 70")
        out[name] = _changes_as_strings(t.changes(0))
    return out


def _change_feed_jobs(lake) -> list[dict]:
    """delta-spark reads skiplake's change feed, writes more to those tables and reads it all
    again; it also builds a table of its own for skiplake to read and write to."""
    def changes(path: str) -> str:
        return (f"SELECT id, part, qty, _change_type, _commit_version, unix_millis(_commit_timestamp) AS _commit_ms "
                f"FROM table_changes_by_path('{path}', 0)")
    jobs = []
    for name in (CDF_OURS, CDF_OURS_DV):
        path, q = lake.path_of(name), reader._quote_path(lake.path_of(name))
        jobs += [
            {"id": f"{name}:changes", "op": "sql", "sql": changes(path)},
            {"id": f"{name}:dml:0", "op": "sql", "sql": f"DELETE FROM {q} WHERE id % 5 = 1"},
            {"id": f"{name}:dml:1", "op": "sql", "sql": f"UPDATE {q} SET qty = qty + 1000 WHERE id % 5 = 2"},
            {"id": f"{name}:dml:2", "op": "sql", "sql": f"MERGE INTO {q} t USING (SELECT id, 'p9' AS part, 7 AS qty "
                                                         f"FROM range(1005, 1020)) s ON t.id = s.id WHEN MATCHED "
                                                         f"THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"},
            {"id": f"{name}:changes_after", "op": "sql", "sql": changes(path)},
            {"id": f"{name}:read", "op": "read", "path": path, "columns": ["id", "part", "qty"]},
        ]
    path = os.path.join(lake.root, CDF_SPARK)
    q = reader._quote_path(path)
    steps = [
        f"CREATE TABLE {q} (id BIGINT, part STRING, qty INT) USING delta PARTITIONED BY (part) TBLPROPERTIES "
        "('delta.enableChangeDataFeed' = 'true', 'delta.enableDeletionVectors' = 'true')",
        f"INSERT INTO {q} SELECT id, concat('p', CAST(id % 3 AS STRING)), CAST(id % 10 AS INT) FROM range(0, 60)",
        f"DELETE FROM {q} WHERE id % 7 = 0",
        f"UPDATE {q} SET qty = qty + 100 WHERE qty < 3",
        f"MERGE INTO {q} t USING (SELECT id, concat('p', CAST(id % 3 AS STRING)) AS part, 5 AS qty FROM range(50, 70)) s "
        "ON t.id = s.id WHEN MATCHED AND s.id % 4 = 0 THEN DELETE WHEN MATCHED THEN UPDATE SET * "
        "WHEN NOT MATCHED THEN INSERT *",
    ]
    jobs += [{"id": f"{CDF_SPARK}:{i}", "op": "sql", "sql": sql} for i, sql in enumerate(steps)]
    jobs += [{"id": f"{CDF_SPARK}:changes", "op": "sql", "sql": changes(path)}]
    return jobs


CK_OURS, CK_SPARK = "ck_ours", "ck_spark"


GEN_OURS, GEN_SPARK = "gen_ours", "gen_spark"
ID_OURS, ID_SPARK = "id_ours", "id_spark"


def _build_constraint_table(spark, lake) -> None:
    t = lake.create_table(CK_OURS, "id long not null, qty int, name string")
    t.append(spark.sql("SELECT id, CAST(id % 10 AS INT) AS qty, concat('n', id) AS name FROM range(0, 10)"))
    t.add_constraint("qty_pos", "qty >= 0")
    g = lake.create_table(GEN_OURS, "id long, ts timestamp, d date", partition_by=["d"],
                          generated_columns={"d": "CAST(ts AS DATE)"})
    g.append(spark.sql("SELECT id, TIMESTAMP'2024-05-01 12:00:00' AS ts FROM range(0, 3)"))
    from skiplake import IdentityColumn
    i = lake.create_table(ID_OURS, "id long, name string", identity_columns={"id": IdentityColumn(start=1, step=1)})
    i.append(spark.sql("SELECT concat('ours', id) AS name FROM range(0, 4)").repartition(2))


def _constraint_jobs(lake) -> list[dict]:
    """delta-spark keeps skiplake's CHECK constraint; it builds a constrained table for skiplake."""
    ours, theirs = (reader._quote_path(lake.path_of(CK_OURS)),
                    reader._quote_path(os.path.join(lake.root, CK_SPARK)))
    return [
        {"id": "ck_ours:bad", "op": "sql", "sql": f"INSERT INTO {ours} VALUES (100, -1, 'bad')"},
        {"id": "ck_ours:null", "op": "sql", "sql": f"INSERT INTO {ours} VALUES (NULL, 1, 'null id')"},
        {"id": "ck_ours:good", "op": "sql", "sql": f"INSERT INTO {ours} VALUES (101, 1, 'good')"},
        {"id": "ck_ours:read", "op": "read", "path": lake.path_of(CK_OURS), "columns": ["id", "qty", "name"]},
        {"id": "ck_spark:0", "op": "sql", "sql": f"CREATE TABLE {theirs} (id BIGINT NOT NULL, qty INT, name STRING) "
                                                 "USING delta"},
        {"id": "ck_spark:1", "op": "sql", "sql": f"INSERT INTO {theirs} VALUES (1, 1, 'a'), (2, 2, 'b')"},
        {"id": "ck_spark:2", "op": "sql", "sql": f"ALTER TABLE {theirs} ADD CONSTRAINT qty_pos CHECK (qty >= 0)"},
        {"id": "gen_ours:insert", "op": "sql", "sql": f"INSERT INTO {reader._quote_path(lake.path_of(GEN_OURS))} "
                                                      "(id, ts) VALUES (7, TIMESTAMP'2024-06-02 01:00:00')"},
        {"id": "gen_ours:bad", "op": "sql", "sql": f"INSERT INTO {reader._quote_path(lake.path_of(GEN_OURS))} "
                                                   "VALUES (8, TIMESTAMP'2024-06-02 01:00:00', DATE'1999-01-01')"},
        {"id": "gen_ours:read", "op": "read", "path": lake.path_of(GEN_OURS), "columns": ["id", "ts", "d"]},
        {"id": "gen_spark:0", "op": "sql", "sql": f"CREATE TABLE {reader._quote_path(os.path.join(lake.root, GEN_SPARK))} "
                                                  "(id BIGINT, ts TIMESTAMP, d DATE GENERATED ALWAYS AS (CAST(ts AS DATE))) "
                                                  "USING delta PARTITIONED BY (d)"},
        {"id": "id_ours:insert", "op": "sql", "sql": f"INSERT INTO {reader._quote_path(lake.path_of(ID_OURS))} "
                                                     "(name) VALUES ('theirs1'), ('theirs2')"},
        {"id": "id_ours:read", "op": "read", "path": lake.path_of(ID_OURS), "columns": ["id", "name"]},
        {"id": "id_spark:0", "op": "sql", "sql": f"CREATE TABLE {reader._quote_path(os.path.join(lake.root, ID_SPARK))} "
                                                 "(id BIGINT GENERATED ALWAYS AS IDENTITY (START WITH 5 INCREMENT BY 3), "
                                                 "name STRING) USING delta"},
        {"id": "id_spark:1", "op": "sql", "sql": f"INSERT INTO {reader._quote_path(os.path.join(lake.root, ID_SPARK))} "
                                                 "(name) VALUES ('a'), ('b'), ('c')"},
        {"id": "gen_spark:1", "op": "sql", "sql": f"INSERT INTO {reader._quote_path(os.path.join(lake.root, GEN_SPARK))} "
                                                  "(id, ts) VALUES (1, TIMESTAMP'2024-01-05 03:00:00')"},
    ]


CL_OURS, CL_SPARK = "cl_ours", "cl_spark"
CL_COLUMNS = ["id", "k", "name"]


def _cl_rows(spark, lo: int, hi: int):
    return spark.sql(f"SELECT id, CAST(id * 7919 % 997 AS INT) AS k, concat('n', id) AS name FROM range({lo}, {hi})")


def _cl_values(lo: int, hi: int) -> str:
    return ", ".join(f"({i}, {i * 7919 % 997}, 'n{i}')" for i in range(lo, hi))


def _build_clustered_table(spark, lake) -> None:
    """skiplake's clustered table: one cube, then an append delta-spark's OPTIMIZE clusters."""
    t = lake.create_table(CL_OURS, "id long, k int, name string", cluster_by=["k", "id"])
    t.append(_cl_rows(spark, 0, 300).repartition(2))
    t.optimize(target_file_size=2048)
    t.append(_cl_rows(spark, 300, 400).repartition(1))


def _clustering_jobs(lake) -> list[dict]:
    ours, theirs = (reader._quote_path(lake.path_of(CL_OURS)),
                    reader._quote_path(os.path.join(lake.root, CL_SPARK)))
    return [
        {"id": "cl_ours:insert", "op": "sql", "sql": f"INSERT INTO {ours} VALUES {_cl_values(400, 410)}"},
        {"id": "cl_ours:optimize", "op": "sql", "sql": f"OPTIMIZE {ours}"},
        {"id": "cl_spark:0", "op": "sql", "sql": f"CREATE TABLE {theirs} (id BIGINT, k INT, name STRING) "
                                                 "USING delta CLUSTER BY (k)"},
        {"id": "cl_spark:1", "op": "sql", "sql": f"INSERT INTO {theirs} VALUES {_cl_values(0, 200)}"},
        {"id": "cl_spark:2", "op": "sql", "sql": f"INSERT INTO {theirs} VALUES {_cl_values(200, 300)}"},
        {"id": "cl_spark:3", "op": "sql", "sql": f"OPTIMIZE {theirs}"},
        {"id": "cl_spark:4", "op": "sql", "sql": f"INSERT INTO {theirs} VALUES {_cl_values(300, 350)}"},
    ]


def _cluster_between_batches(spark, lake, result: dict) -> dict:
    """skiplake reads delta-spark's OPTIMIZE of its table, then clusters delta-spark's table
    incrementally, appends, and changes its keys, for delta-spark's second batch to read."""
    out: dict = {}
    ours = lake.table(CL_OURS)
    out["ours_history"] = ours.history(1)[0]
    out["ours_files"] = [(f.clusteringProvider, dict(f.tags or {})) for f in ours.snapshot.add_files]
    out["ours_rows"] = rows_as_strings(ours.read(), CL_COLUMNS)
    if not all(result["jobs"][f"cl_spark:{i}"]["ok"] for i in range(5)):
        return out
    t = lake.table(CL_SPARK)
    out["columns"] = t.clustering_columns
    files = t.snapshot.add_files
    out["theirs_files"] = [(f.clusteringProvider, dict(f.tags or {})) for f in files]
    # delta-spark's cube is kept; the rows of its last INSERT are clustered into a new cube.
    out["optimize"] = t.optimize(target_file_size=2048, min_cube_size=1).to_dict()
    out["kept"] = {f.path for f in files if f.clusteringProvider} <= {f.path for f in t.snapshot.add_files}
    t.append(_cl_rows(spark, 350, 380))
    t.cluster_by(["k", "id"])
    out["theirs_rows"] = rows_as_strings(t.read(), CL_COLUMNS)
    return out


def _second_clustering_jobs(lake) -> list[dict]:
    theirs = os.path.join(lake.root, CL_SPARK)
    return [
        {"id": "cl_spark:read", "op": "read", "path": theirs, "columns": CL_COLUMNS},
        {"id": "cl_spark:optimize", "op": "sql_read", "sql": f"OPTIMIZE {reader._quote_path(theirs)}",
         "path": theirs},
        {"id": "cl_spark:detail", "op": "sql", "sql": f"DESCRIBE DETAIL {reader._quote_path(theirs)}"},
    ]


RT_OURS, RT_SPARK = "rt_ours", "rt_spark"


def _row_ids_sql(path: str) -> str:
    return f"SELECT id, _metadata.row_id, _metadata.row_commit_version FROM {reader._quote_path(path)}"


def _ids_of(t) -> list[tuple]:
    return sorted((str(r.id), str(r._row_id), str(r._row_commit_version)) for r in t.read(with_row_ids=True).collect())


def _build_row_tracking_table(spark, lake) -> None:
    t = lake.create_table(RT_OURS, "id long, v int", properties={"delta.enableRowTracking": "true"})
    t.append(spark.sql("SELECT id, CAST(id AS INT) AS v FROM range(0, 20)").repartition(2))
    t.update("id = 3", {"v": "v + 100"})
    t.delete("id >= 18")


def _row_tracking_jobs(lake) -> list[dict]:
    ours, theirs = lake.path_of(RT_OURS), os.path.join(lake.root, RT_SPARK)
    q = reader._quote_path(theirs)
    return [
        {"id": "rt_ours:ids", "op": "sql", "sql": _row_ids_sql(ours)},
        {"id": "rt_ours:insert", "op": "sql", "sql": f"INSERT INTO {reader._quote_path(ours)} VALUES (100, 1)"},
        {"id": "rt_spark:0", "op": "sql", "sql": f"CREATE TABLE {q} (id BIGINT, v INT) USING delta "
                                                 "TBLPROPERTIES ('delta.enableRowTracking' = 'true')"},
        {"id": "rt_spark:1", "op": "sql", "sql": f"INSERT INTO {q} SELECT id, CAST(id AS INT) FROM range(0, 10)"},
        {"id": "rt_spark:2", "op": "sql", "sql": f"UPDATE {q} SET v = v + 1 WHERE id < 3"},
        {"id": "rt_spark:ids", "op": "sql", "sql": _row_ids_sql(theirs)},
    ]


def _row_ids_between_batches(spark, lake, result: dict) -> dict:
    """skiplake reads the ids delta-spark gave (materialized by its UPDATE too) and writes more."""
    out: dict = {"rt_ours_after_insert": _ids_of(lake.table(RT_OURS))}
    if not all(result["jobs"][f"rt_spark:{i}"]["ok"] for i in range(3)):
        return out
    t = lake.table(RT_SPARK)
    out["rt_spark_ids"] = _ids_of(t)
    t.append(spark.sql("SELECT id, CAST(id AS INT) AS v FROM range(10, 15)"))
    t.delete("id = 9")
    out["rt_spark_after"] = _ids_of(t)
    return out


def _second_row_tracking_jobs(lake) -> list[dict]:
    return [{"id": "rt_spark:ids2", "op": "sql", "sql": _row_ids_sql(os.path.join(lake.root, RT_SPARK))}]


def _ok(job: dict) -> dict:
    assert job["ok"], f"delta-spark failed: {job.get('error_class')}: {job.get('error')}\n{job.get('traceback')}"
    return job


def _tuples(job: dict) -> list[tuple]:
    return [tuple(r) for r in job["rows"]]


def _type_names(schema_json: dict) -> list[tuple[str, str]]:
    return [(f["name"], f["type"] if isinstance(f["type"], str) else json.dumps(f["type"]))
            for f in schema_json["fields"]]


# ---------------------------------------------------------------- 1. delta-spark reads skiplake


def test_delta_spark_reads_skiplake_table(interop: Interop) -> None:
    t = interop.lake.table("main")
    v = interop.versions
    assert t.version == v["append6"] == 13
    assert [v[s] for s in ("append1", "delete", "update_partition", "merge", "optimize", "append5")] == \
        [1, 4, 6, 8, 9, 10], f"every step must commit exactly once: {v}"
    log = Path(t.path) / "_delta_log"
    assert (log / f"{10:020d}.checkpoint.parquet").exists()
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 10

    job = _ok(interop.job("main"))
    expected = rows_as_strings(t.read(), COLUMNS)
    assert job["count"] == len(expected) > 100
    assert _tuples(job) == expected
    assert job["version"] == t.version
    assert _type_names(job["schema"]) == _type_names(json.loads(t.schema.json()))

    # DESCRIBE HISTORY sees every commit skiplake made, with skiplake's operation names.
    ops = {h["version"]: h["operation"] for h in job["history"]}
    assert sorted(ops) == list(range(t.version + 1))
    ours = {h["version"]: h.get("operation") for h in t.history()}
    assert ops == ours
    assert ops[v["merge"]] == "MERGE" and ops[v["optimize"]] == "OPTIMIZE"
    assert ops[v["delete"]] == "DELETE" and ops[v["update"]] == "UPDATE"


# ---------------------------------------------------------------- 2. time travel


@pytest.mark.parametrize("step", TIME_TRAVEL_STEPS)
def test_delta_spark_time_travel_matches_skiplake(interop: Interop, step: str) -> None:
    t = interop.lake.table("main")
    version = interop.versions[step]
    job = _ok(interop.job(f"main@{step}"))
    expected = rows_as_strings(t.read(version=version), COLUMNS)
    assert job["version"] == version
    assert job["count"] == len(expected)
    assert _tuples(job) == expected


# ---------------------------------------------------------------- 3. delta-spark writes, skiplake reads


def test_skiplake_reads_what_delta_spark_wrote(interop: Interop, spark) -> None:
    appended = _ok(interop.job("written:append"))
    after_append = _ok(interop.job("written@append"))
    _ok(interop.job("written:delete"))
    after_delete = _ok(interop.job("written@delete"))
    assert appended["version"] == 3 and after_delete["version"] == 4

    new_rows = rows_as_strings(_frame(spark, interop.written_ids), COLUMNS)
    expected_after_append = sorted(interop.written_before + new_rows,
                                   key=lambda r: tuple((v is None, v or "") for v in r))
    assert _tuples(after_append) == expected_after_append

    t = interop.lake.table("written")
    assert t.version == 4
    # delta-spark wrote a checkpoint at 3 (delta.checkpointInterval=3); skiplake loads through it.
    log = Path(t.path) / "_delta_log"
    assert (log / f"{3:020d}.checkpoint.parquet").exists()

    # The append, read by skiplake (time travel to delta-spark's version 3).
    assert rows_as_strings(t.read(version=3), COLUMNS) == expected_after_append

    # After delta-spark's DELETE: the same rows on both sides, and none that the DELETE matched.
    ours = rows_as_strings(t.read(), COLUMNS)
    assert ours == _tuples(after_delete)
    assert t.read(where=DELETE_WHERE_DS).count() == 0
    kept = t.read(version=3).filter(f"NOT coalesce(({DELETE_WHERE_DS}), false)")
    assert ours == rows_as_strings(kept, COLUMNS) and len(ours) < len(expected_after_append)

    # Pruned reads over delta-spark's files: its stats truncate timestamps to milliseconds, so a
    # row whose timestamp has microseconds lies above its file's maxValues.ts.
    survivors = [r for r in ours if int(r[0]) >= 1000 and r[6] is not None and len(r[6]) == 26
                 and not r[6].endswith("000")]
    assert survivors, "no row written by delta-spark with sub-millisecond digits survived the DELETE"
    for r in survivors[:3]:
        rid, day, ts = r[0], r[5], r[6]
        got = t.read(where=f"ts = TIMESTAMP'{ts}'").filter(f"id = {rid}").count()
        assert got == 1, f"skiplake pruned away row id={rid} (ts={ts}) of a delta-spark file"
        assert t.read(where=f"ts >= TIMESTAMP'{ts}' AND d = DATE'{day}'").filter(f"id = {rid}").count() == 1


# ---------------------------------------------------------------- 4. delta.isolationLevel=WriteSerializable


def test_delta_spark_and_write_serializable_property(interop: Interop) -> None:
    # skiplake's create_table accepts WriteSerializable (Serializable and WriteSerializable only).
    assert interop.create_error is None, interop.create_error
    t = interop.lake.table("wser")
    assert t.properties["delta.isolationLevel"] == "WriteSerializable"
    read = interop.job("wser:read")
    append = interop.job("wser:append")
    after = interop.job("wser:read_after")
    # OBSERVED (delta-spark 4.4.0 on Spark 4.1.4): delta-spark accepts such a table for a read and
    # for a blind append, and its append runs at that level (commitInfo.isolationLevel =
    # "WriteSerializable"). It validates the property only when it is SET through delta-spark:
    # ALTER TABLE ... SET TBLPROPERTIES ('delta.isolationLevel' = 'WriteSerializable') fails with
    # "SparkException: Unsupported table change: requirement failed: delta.isolationLevel must be
    # Serializable". If a later delta-spark starts rejecting the value on read or write, this fails.
    assert read["ok"], read.get("error")
    assert read["version"] == 1
    assert _tuples(read) == rows_as_strings(t.read(version=1), COLUMNS)
    assert append["ok"], append.get("error")
    assert append["version"] == 2 and t.version == 2
    assert _ok(after)["version"] == 2
    assert _tuples(after) == rows_as_strings(t.read(), COLUMNS)
    assert len(after["rows"]) == len(read["rows"]) + 5
    # ... and its own commit ran at the table's level: commitInfo.isolationLevel = WriteSerializable.
    commit = [json.loads(line) for line in (Path(t.path) / "_delta_log" / f"{2:020d}.json").read_text().splitlines()]
    info = next(a["commitInfo"] for a in commit if "commitInfo" in a)
    assert info["isolationLevel"] == "WriteSerializable" and info["engineInfo"].find("Delta-Lake/") >= 0
    # delta-spark kept the property as it was.
    assert t.properties["delta.isolationLevel"] == "WriteSerializable"
    assert t.history()[0]["operation"] == "WRITE"
    alter = interop.job("wser_alter:set")
    assert not alter["ok"]
    assert "delta.isolationLevel must be Serializable" in alter["error"], alter["error"]
    wa = interop.lake.table("wser_alter")
    assert wa.version == 1 and "delta.isolationLevel" not in wa.properties


# ---------------------------------------------------------------- 5. delta-spark's deletion vectors


@pytest.mark.parametrize("name", [DV_TABLE, DV_PART_TABLE])
def test_skiplake_reads_delta_sparks_deletion_vectors(interop: Interop, spark, name: str) -> None:
    lake = interop.lake
    path = os.path.join(lake.root, name)
    for step in DV_STEPS:
        _ok(interop.job(f"{path}:{step}"))
    theirs = _ok(interop.job(f"{path}:read"))
    t = lake.table(name)
    snapshot = t.snapshot
    assert "deletionVectors" in (snapshot.protocol.readerFeatures or ())
    with_dv = [f for f in snapshot.add_files if f.deletionVector]
    assert with_dv, "delta-spark wrote no deletion vector: the test would prove nothing"
    # The rows: the same as delta-spark's, and as the statements say.
    ours = rows_as_strings(t.read(), ["id", "g", "s", "x"])
    assert ours == _tuples(theirs)
    alive = [i for i in range(3000) if i % 7 and i % 11 and i != 5]
    assert sorted(int(r[0]) for r in ours) == alive
    assert sorted(int(r[0]) for r in ours if r[2].startswith("u")) == [i for i in alive if i % 13 == 0]
    # Reports count logical rows; pruned reads and lake.sql drop the same rows.
    assert t.scan().report.rows_total == len(alive)
    assert sorted(r.id for r in t.read("id < 100 AND g = 1").collect()) == [i for i in alive if i < 100 and i % 4 == 1]
    count = lake.sql(f"SELECT count(*) AS n, sum(id) AS s FROM {name} WHERE g IN (0, 2)").collect()[0]
    picked = [i for i in alive if i % 4 in (0, 2)]
    assert (count.n, count.s) == (len(picked), sum(picked))
    # delta-spark wrote checkpoints (interval 2): the DVs came through one of them too.
    assert any(p.name.endswith(".checkpoint.parquet") for p in (Path(path) / "_delta_log").iterdir())


def test_delta_spark_reads_skiplakes_deletion_vectors(interop: Interop) -> None:
    t = interop.lake.table(DV_OURS)
    assert any(f.deletionVector for f in t.snapshot.add_files), "skiplake wrote no deletion vector"
    theirs = _ok(interop.job("dv_ours:read"))
    assert _tuples(theirs) == interop.dv_expected
    ids = sorted(int(r[0]) for r in interop.dv_expected)
    assert 0 not in ids and 130 > max(ids) >= 120 and all(i % 5 for i in ids if i < 100)


# ---------------------------------------------------------------- 6. delta-spark's column mapping


@pytest.mark.parametrize("name", list(CM_TABLES))
def test_skiplake_reads_delta_sparks_column_mapping(interop: Interop, spark, name: str) -> None:
    for i in range(6):
        _ok(interop.job(f"{name}:{i}"))
    theirs = _ok(interop.job(f"{name}:read"))
    t = interop.lake.table(name)
    assert t.snapshot.column_mapping == CM_TABLES[name]
    assert t.read().columns == CM_COLUMNS  # logical names: renamed s2, dropped x gone
    ours = rows_as_strings(t.read(), CM_COLUMNS)
    assert ours == _tuples(theirs) and len(ours) == sum(1 for i in range(700) if i >= 600 or i % 7)
    # Skipping by stats and partition values kept under physical names in the log.
    plan = t.scan("g = 1 AND id >= 600")
    assert plan.report.files_selected < plan.report.files_total
    got = sorted(r.id for r in t.read("g = 1 AND id >= 600 AND s2 LIKE 'n%'").collect())
    assert got == [i for i in range(600, 700) if i % 3 == 1]
    assert sorted(r.a for r in t.read("id = 11").select("st.a").collect()) == [1]
    count = interop.lake.sql(f"SELECT count(*) AS n FROM {name} WHERE st.b = 'b12'").collect()[0].n
    assert count == 1
    # skiplake's DELETE on delta-spark's table marks the row with a deletion vector.
    t.delete("id = 1")
    assert t.read("id = 1").count() == 0 and t.read().count() == len(ours) - 1
    assert any(isinstance(a, AddFile) and a.deletionVector for a in read_commit(log_storage(t.path), t.version))
    # Appends are written under the physical names, with partition values and stats keyed so.
    new = spark.sql("SELECT 5000L + id AS id, CAST(id % 3 AS INT) AS g, concat('a', id) AS s2, "
                    "named_struct('a', CAST(id AS INT), 'b', 'appended') AS st FROM range(6)")
    t.append(new)
    log = read_commit(log_storage(t.path), t.version)
    adds = [a for a in log if isinstance(a, AddFile)]
    phys = {f.name: f.metadata["delta.columnMapping.physicalName"] for f in t.snapshot.schema.fields}
    assert adds and all(set(a.partitionValues) == {phys["g"]} for a in adds)
    assert all(phys["id"] in json.loads(a.stats)["minValues"] for a in adds)
    assert sorted(r.id for r in t.read("st.b = 'appended'").collect()) == list(range(5000, 5006))
    assert t.read().count() == len(ours) - 1 + 6
    assert t.scan("id >= 5000").report.files_selected < t.scan().report.files_total
    # delta-rs (DataFusion) reads the table with skiplake's append, under the logical names.
    deltalake = pytest.importorskip("deltalake")
    import pyarrow as pa
    got = pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(t.path)).execute(
        "SELECT count(*) AS n, sum(id) AS s FROM t WHERE s2 LIKE 'a%'").read_all()).to_pylist()[0]
    assert (got["n"], got["s"]) == (6, sum(range(5000, 5006)))


def test_delta_spark_reads_skiplakes_column_mapping(interop: Interop) -> None:
    """A table skiplake created with column mapping and changed by every kind of write (renames
    and a drop among them) reads the same in delta-spark."""
    theirs = _ok(interop.job("cm_ours:read"))
    assert _tuples(theirs) == interop.cm_expected
    ids = sorted(int(r[0]) for r in interop.cm_expected)
    assert 1000 in ids and 0 not in ids and 309 in ids
    assert any(r[2] == "S1" for r in interop.cm_expected) and any(r[2] == "m" for r in interop.cm_expected)
    # delta-rs (DataFusion) too, under the logical names after the renames.
    deltalake = pytest.importorskip("deltalake")
    import pyarrow as pa
    got = pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(interop.lake.path_of(CM_OURS))).execute(
        "SELECT count(*) AS n, sum(id) AS s FROM t WHERE label <> 'm'").read_all()).to_pylist()[0]
    kept = [int(r[0]) for r in interop.cm_expected if r[2] != "m"]
    assert (got["n"], got["s"]) == (len(kept), sum(kept))


# ---------------------------------------------------------------- protocol features


@pytest.mark.parametrize("name,columns", [(V2_SPARK, ["id", "g", "s"]), (V2_JSON_SPARK, ["id", "g", "s"]),
                                          (TW_SPARK, TW_COLUMNS), (VARIANT_SPARK, V_COLUMNS),
                                          (SHRED_SPARK, V_COLUMNS)])
def test_skiplake_reads_delta_sparks_protocol_features(interop: Interop, name: str, columns: list[str]) -> None:
    for i in range(len([k for k in interop.result["jobs"] if k.startswith("features:")])):
        _ok(interop.job(f"features:{i}"))
    theirs = _ok(interop.job(f"{name}:read"))
    t = interop.lake.table(name)
    assert _tuples(theirs) == rows_as_strings(t.read(), columns) and theirs["count"] > 0
    log = Path(t.path) / "_delta_log"
    if name in (V2_SPARK, V2_JSON_SPARK):
        suffix = ".json" if name == V2_JSON_SPARK else ".parquet"
        uuid_named = [p for p in log.iterdir() if ".checkpoint." in p.name and p.name.endswith(suffix)
                      and not p.name.endswith(".checkpoint.parquet")]
        assert uuid_named, sorted(p.name for p in log.iterdir())
        assert "v2Checkpoint" in t.detail().table_features
    if name == TW_SPARK:
        changes = {f["name"]: f["metadata"].get("delta.typeChanges") for f in json.loads(t.schema.json())["fields"]}
        assert changes["a"] and changes["f"] and changes["d"] and changes["b"]


def test_planning_a_type_widened_table_keeps_every_matching_row(interop: Interop) -> None:
    """Older files' stats are in the old type: a float's stat read as a double is not the value
    the file holds, yet a predicate at that value must still find the row."""
    t = interop.lake.table(TW_SPARK)
    everything = t.read()
    for where in ("f >= CAST(CAST(4.4 AS FLOAT) AS DOUBLE)", "f <= CAST(CAST(3.3 AS FLOAT) AS DOUBLE)",
                  "a > 11", "a = 5000000003", "d >= 2.75", "b >= 100000", "b = 11", "dt = DATE'2024-01-03'"):
        assert t.read(where=where).count() == everything.filter(where).count() > 0, where
    assert t.scan(where="a > 1000").report.files_selected < t.scan().report.files_selected


def test_skiplake_writes_to_delta_sparks_widened_and_variant_tables(interop: Interop, spark) -> None:
    tw = interop.lake.table(TW_SPARK)
    before = tw.read().count()
    tw.append(spark.sql("SELECT 7000000000L AS a, 0.5D AS f, CAST(1.5 AS DECIMAL(10,4)) AS d, DATE'2026-01-01' AS dt, "
                        "200000 AS b, 'ours' AS s"))
    assert tw.read().count() == before + 1
    assert tw.read(where="a = 7000000000").count() == 1
    changes = {f["name"]: f["metadata"].get("delta.typeChanges") for f in json.loads(tw.schema.json())["fields"]}
    assert changes["a"], "the record of past type changes is kept"
    var = interop.lake.table(VARIANT_SPARK)
    var.append(spark.sql("SELECT 99L AS id, parse_json('{\"k\":99}') AS v"))
    got = var.read(where="id = 99").selectExpr("variant_get(v, '$.k', 'int') AS k").collect()
    assert [r.k for r in got] == [99]


def test_delta_spark_reads_skiplakes_v2_checkpoints_and_variants(interop: Interop) -> None:
    for name, columns in ((V2_OURS, ["id", "g", "s"]), (VARIANT_OURS, V_COLUMNS)):
        theirs = _ok(interop.job(f"{name}:read"))
        assert _tuples(theirs) == interop.features_expected[name] and theirs["count"] > 0
    log = Path(interop.lake.path_of(V2_OURS)) / "_delta_log"
    assert any(p.name.startswith(f"{4:020d}.checkpoint.") for p in log.iterdir())
    assert list((log / "_sidecars").iterdir())


def _job_rows(job: dict) -> list[tuple]:
    return sorted((tuple(r) for r in _ok(job)["rows"]), key=lambda t: tuple((v is None, v or "") for v in t))


@pytest.mark.parametrize("name", [CDF_OURS, CDF_OURS_DV])
def test_delta_spark_reads_skiplakes_change_feed(interop: Interop, name: str) -> None:
    """delta-spark's table_changes over skiplake's DELETE, UPDATE, MERGE and replaceWhere gives
    what skiplake's own change read gives; delta-spark then writes more, and skiplake reads the
    whole feed (delta-spark's change files and deletion vectors too) as delta-spark does."""
    assert _job_rows(interop.job(f"{name}:changes")) == interop.cdf_expected[name]
    for i in range(3):
        _ok(interop.job(f"{name}:dml:{i}"))
    t = interop.lake.table(name)
    assert _job_rows(interop.job(f"{name}:changes_after")) == _changes_as_strings(t.changes(0))
    assert _tuples(_ok(interop.job(f"{name}:read"))) == rows_as_strings(t.read(), ["id", "part", "qty"])


def test_skiplake_reads_and_extends_delta_sparks_change_feed(interop: Interop, spark) -> None:
    for i in range(5):
        _ok(interop.job(f"{CDF_SPARK}:{i}"))
    t = interop.lake.table(CDF_SPARK)
    assert _job_rows(interop.job(f"{CDF_SPARK}:changes")) == _changes_as_strings(t.changes(0))
    version = t.version
    t.update("id % 5 = 3", {"qty": "qty - 1000"})
    t.delete("id % 5 = 4")
    ours = t.changes(version + 1).collect()
    before, after = t.read(version=version), t.read()
    assert sum(r["_change_type"] == "update_preimage" for r in ours) == before.filter("id % 5 = 3").count() > 0
    assert sum(r["_change_type"] == "delete" for r in ours) == before.filter("id % 5 = 4").count() > 0
    assert after.count() == before.count() - before.filter("id % 5 = 4").count()


def test_delta_spark_keeps_skiplakes_constraints(interop: Interop) -> None:
    for bad in ("ck_ours:bad", "ck_ours:null"):
        job = interop.job(bad)
        assert not job["ok"] and ("qty_pos" in job["error"] or "NOT NULL" in job["error"].upper()), job
    _ok(interop.job("ck_ours:good"))
    ids = [r[0] for r in _tuples(_ok(interop.job("ck_ours:read")))]
    assert "101" in ids and "100" not in ids and len(ids) == 11


def test_skiplake_keeps_delta_sparks_constraints(interop: Interop, spark) -> None:
    from skiplake.errors import ConstraintViolationError
    for i in range(3):
        _ok(interop.job(f"ck_spark:{i}"))
    t = interop.lake.table(CK_SPARK)
    assert t.constraints == {"qty_pos": "qty >= 0"}
    with pytest.raises(ConstraintViolationError, match="qty_pos"):
        t.append(spark.sql("SELECT 3L AS id, -3 AS qty, 'c' AS name"))
    with pytest.raises(ConstraintViolationError, match="NOT NULL"):
        t.append(spark.sql("SELECT CAST(NULL AS BIGINT) AS id, 3 AS qty, 'c' AS name"))
    t.append(spark.sql("SELECT 3L AS id, 3 AS qty, 'c' AS name"))
    assert sorted(r.id for r in t.read().collect()) == [1, 2, 3]


def test_generated_columns_both_ways(interop: Interop, spark) -> None:
    """delta-spark computes skiplake's generated column and refuses a wrong value; skiplake
    computes delta-spark's and refuses a wrong value."""
    from skiplake.errors import ConstraintViolationError
    _ok(interop.job("gen_ours:insert"))
    assert not interop.job("gen_ours:bad")["ok"]
    rows = {r[0]: r[2] for r in _tuples(_ok(interop.job("gen_ours:read")))}
    assert rows["7"] == "2024-06-02" and rows["0"] == "2024-05-01" and "8" not in rows
    for i in range(2):
        _ok(interop.job(f"gen_spark:{i}"))
    t = interop.lake.table(GEN_SPARK)
    t.append(spark.sql("SELECT 2L AS id, TIMESTAMP'2024-02-06 04:00:00' AS ts"))
    with pytest.raises(ConstraintViolationError, match="generated column d"):
        t.append(spark.sql("SELECT 3L AS id, TIMESTAMP'2024-02-06 04:00:00' AS ts, DATE'2000-01-01' AS d"))
    assert {r.id: str(r.d) for r in t.read().collect()} == {1: "2024-01-05", 2: "2024-02-06"}


def test_identity_columns_both_ways(interop: Interop, spark) -> None:
    """delta-spark continues skiplake's identity column past its high-water mark, and skiplake
    delta-spark's: no value repeats, every value is start + k * step."""
    _ok(interop.job("id_ours:insert"))
    rows = _tuples(_ok(interop.job("id_ours:read")))
    ours = [int(r[0]) for r in rows if r[1].startswith("ours")]
    theirs = [int(r[0]) for r in rows if r[1].startswith("theirs")]
    assert len(set(ours + theirs)) == 6 and min(theirs) > max(ours)
    for i in range(2):
        _ok(interop.job(f"id_spark:{i}"))
    t = interop.lake.table(ID_SPARK)
    before = [r.id for r in t.read().collect()]
    t.append(spark.sql("SELECT 'd' AS name UNION ALL SELECT 'e'"))
    after = [r.id for r in t.read().collect()]
    added = sorted(set(after) - set(before))
    assert len(after) == len(set(after)) == 5 and min(added) > max(before)
    assert all((v - 5) % 3 == 0 for v in after)


def test_delta_spark_optimizes_skiplakes_clustered_table(interop: Interop) -> None:
    """delta-spark appends to skiplake's clustered table, and its OPTIMIZE reads skiplake's
    clustering domain and cube tags: it clusters by skiplake's keys, and the rows stay the same."""
    _ok(interop.job("cl_ours:insert"))
    _ok(interop.job("cl_ours:optimize"))
    c = interop.clustering
    assert c["ours_history"]["operation"] == "OPTIMIZE"
    assert json.loads(c["ours_history"]["operationParameters"]["clusterBy"]) == ["k", "id"]
    assert all(provider == "liquid" and json.loads(tags["ZCUBE_ZORDER_BY"]) == ["k", "id"]
               for provider, tags in c["ours_files"])
    assert sorted(int(r[0]) for r in c["ours_rows"]) == list(range(410))


def test_skiplake_clusters_delta_sparks_table_and_delta_spark_reads_it(interop: Interop) -> None:
    """skiplake reads delta-spark's clustering columns, keeps its cube, clusters the newer rows,
    changes the keys; delta-spark then reads the same rows, OPTIMIZEs by the new keys and
    reports them."""
    c = interop.clustering
    assert c["columns"] == ["k"]
    assert any(provider == "liquid" and "ZCUBE_ID" in tags for provider, tags in c["theirs_files"])
    assert c["optimize"]["files_removed"] >= 1 and c["kept"]
    rows = _tuples(_ok(interop.job("cl_spark:read")))
    assert sorted(rows) == sorted(c["theirs_rows"]) and len(rows) == 380
    assert sorted(_tuples(_ok(interop.job("cl_spark:optimize"))["read"])) == sorted(rows)
    assert "['k', 'id']" in _ok(interop.job("cl_spark:detail"))["rows"][0]


def test_row_ids_agree_both_ways(interop: Interop) -> None:
    """delta-spark reads the row ids skiplake assigned and assigns its own past skiplake's mark;
    skiplake reads delta-spark's (those its UPDATE kept in the materialized column included)
    and assigns its own past delta-spark's; delta-spark then reads the same ids."""
    ours_before = sorted(tuple(r) for r in _tuples(_ok(interop.job("rt_ours:ids"))))
    # skiplake's UPDATE and DELETE kept the ids of the 20 rows first appended, in the
    # materialized columns delta-spark reads.
    assert len(ours_before) == 18 and len({r[1] for r in ours_before}) == 18
    assert all(int(r[1]) < 20 for r in ours_before)
    _ok(interop.job("rt_ours:insert"))
    after = interop.clustering["rt_ours_after_insert"]
    assert [r for r in after if r[0] != "100"] == ours_before
    [new] = [r for r in after if r[0] == "100"]
    assert int(new[1]) > max(int(r[1]) for r in ours_before)
    theirs = sorted(tuple(r) for r in _tuples(_ok(interop.job("rt_spark:ids"))))
    assert interop.clustering["rt_spark_ids"] == theirs and len(theirs) == 10
    final = interop.clustering["rt_spark_after"]
    assert [r for r in final if int(r[0]) < 9] == [r for r in theirs if int(r[0]) < 9]  # skiplake's DELETE kept them
    assert sorted(tuple(r) for r in _tuples(_ok(interop.job("rt_spark:ids2")))) == final
    ids = [int(r[1]) for r in final]
    assert len(final) == 14 and len(set(ids)) == 14
