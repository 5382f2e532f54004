"""The tables of the interop checks with delta-spark, shared by their three test modules.

- GOLDEN_TABLES: what delta-spark 4.4 writes for skiplake to read, one reader-writer feature or
  more each. `make golden` (tests/golden.py) runs their statements once and commits the tables
  under tests/data/golden/ with what delta-spark read back; tests/test_golden_tables.py reads
  them in the gate without delta-spark, and (slow tier) from a live delta-spark run as well.
- The `build_*` functions: skiplake's own tables through every kind of commit, for delta-spark to
  read (tests/test_delta_spark_reads.py, the gate) and to write to (tests/test_delta_spark_writes.py,
  the slow tier).

Rows cross the process boundary as strings cast by Spark in UTC on both sides (`rows_as_strings`),
so timestamps with microseconds, decimals and doubles compare exactly.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from testing_support.delta_spark import rows_as_strings

# ---------------------------------------------------------------- rows of every common type

SCHEMA = ("id BIGINT, qty INT, price DOUBLE, amount DECIMAL(7,2), name STRING, d DATE, "
          "ts TIMESTAMP, flag BOOLEAN, region STRING")
COLUMNS = ["id", "qty", "price", "amount", "name", "d", "ts", "flag", "region"]
TYPES = ["BIGINT", "INT", "DOUBLE", "DECIMAL(7,2)", "STRING", "DATE", "TIMESTAMP", "BOOLEAN", "STRING"]
PARTITION_BY = ["d", "region"]
DATES = ["2024-01-01", "2024-01-02", "2024-02-29"]
REGIONS = ["north", "south east", "ação", None]   # a space, non-ASCII and NULL as partition values
NAMES = ["alpha", "Bravo", "名前", "", None, "o'neil"]


def row(i: int) -> tuple:
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


def frame(spark, ids):
    """A DataFrame of rows `ids` in SCHEMA, cast by Spark (UTC) from text."""
    from pyspark.sql import functions as F
    raw = spark.createDataFrame([row(i) for i in ids], ", ".join(f"{c} STRING" for c in COLUMNS))
    return raw.select(*[F.col(c).cast(t).alias(c) for c, t in zip(COLUMNS, TYPES)])


def select_sql(ids) -> str:
    """The same rows as a SELECT delta-spark can run."""
    def lit(v):
        return "NULL" if v is None else "'" + v.replace("'", "''") + "'"
    values = ", ".join("(" + ", ".join(lit(v) for v in row(i)) + ")" for i in ids)
    casts = ", ".join(f"CAST({c} AS {t}) AS {c}" for c, t in zip(COLUMNS, TYPES))
    return f"SELECT {casts} FROM VALUES {values} AS v({', '.join(COLUMNS)})"


def sort_rows(rows) -> list[tuple]:
    """Rows of strings in the order rows_as_strings gives (NULLs last in each column)."""
    return sorted((tuple(r) for r in rows), key=lambda t: tuple((v is None, v or "") for v in t))


def quote_path(path: str) -> str:
    return "delta.`" + path.replace("`", "``") + "`"


# ---------------------------------------------------------------- what delta-spark writes

@dataclass(frozen=True)
class GoldenTable:
    """A table delta-spark writes: its statements (`{t}` is the table as delta.`path`, `{path}`
    its path), the columns read back, older versions read back too, and other queries whose
    rows are recorded (`name`, SQL with the same placeholders)."""
    name: str
    covers: str
    statements: tuple[str, ...]
    columns: tuple[str, ...]
    versions: tuple[int, ...] = ()
    queries: tuple[tuple[str, str], ...] = ()

    def sql(self, path: str) -> list[str]:
        return [s.replace("{t}", quote_path(path)).replace("{path}", path) for s in self.statements]

    def query(self, name: str, path: str) -> str:
        text = dict(self.queries)[name]
        return text.replace("{t}", quote_path(path)).replace("{path}", path)


def _dv_statements(partition: str) -> tuple[str, ...]:
    # Each DELETE marks rows (a DV per touched file, the second the union with the first), UPDATE
    # marks the old rows and writes new ones; checkpointInterval=2 puts DVs in checkpoints' adds.
    return (
        "CREATE TABLE {t} (id BIGINT, g INT, s STRING, x DECIMAL(9,2)) USING delta " + partition +
        " TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.checkpointInterval' = '2')",
        "INSERT INTO {t} SELECT /*+ REPARTITION(3) */ id, CAST(id % 4 AS INT), concat('s', id), "
        "CAST(id / 7 AS DECIMAL(9,2)) FROM range(0, 3000)",
        "DELETE FROM {t} WHERE id % 7 = 0",
        "DELETE FROM {t} WHERE id % 11 = 0 OR s = 's5'",
        "UPDATE {t} SET s = concat('u', s), x = x + 1 WHERE id % 13 = 0",
    )


def _cm_statements(mode: str) -> tuple[str, ...]:
    return (
        "CREATE TABLE {t} (id BIGINT, g INT, s STRING, x INT, st STRUCT<a: INT, b: STRING>) USING delta "
        f"PARTITIONED BY (g) TBLPROPERTIES ('delta.columnMapping.mode' = '{mode}', "
        "'delta.enableDeletionVectors' = 'true', 'delta.checkpointInterval' = '3')",
        "INSERT INTO {t} SELECT /*+ REPARTITION(2) */ id, CAST(id % 3 AS INT), concat('s', id), 1, "
        "named_struct('a', CAST(id % 10 AS INT), 'b', concat('b', id)) FROM range(0, 600)",
        "ALTER TABLE {t} RENAME COLUMN s TO s2",
        "ALTER TABLE {t} DROP COLUMN x",
        "DELETE FROM {t} WHERE id % 7 = 0",
        "INSERT INTO {t} SELECT id, CAST(id % 3 AS INT), concat('n', id), "
        "named_struct('a', CAST(id % 10 AS INT), 'b', concat('b', id)) FROM range(600, 700)",
    )


_TOP_LEVEL_FORMAT = "spark.databricks.delta.checkpointV2.topLevelFileFormat"


def _v2_statements(fmt: str) -> tuple[str, ...]:
    return (
        f"SET {_TOP_LEVEL_FORMAT} = {fmt}",
        "CREATE TABLE {t} (id BIGINT, g INT, s STRING) USING delta PARTITIONED BY (g) TBLPROPERTIES "
        "('delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '2', 'delta.enableDeletionVectors' = 'true')",
        *[f"INSERT INTO {{t}} SELECT id, CAST(id % 3 AS INT), concat('s', id) FROM range({lo}, {lo + 100})"
          for lo in (0, 100, 200)],
        "DELETE FROM {t} WHERE id % 7 = 0",
        f"SET {_TOP_LEVEL_FORMAT} = parquet",
    )


def _dml_statements() -> tuple[str, ...]:
    # Every kind of commit over every common type, partitioned, past a checkpoint at version 10.
    rows = select_sql
    return (
        f"CREATE TABLE {{t}} ({SCHEMA}) USING delta PARTITIONED BY (d, region)",
        f"INSERT INTO {{t}} {rows(range(0, 40))}",
        f"INSERT INTO {{t}} {rows(range(40, 80))}",
        f"INSERT INTO {{t}} {rows(range(80, 120))}",
        "DELETE FROM {t} WHERE qty > 18 OR (d = DATE'2024-01-02' AND flag)",
        "UPDATE {t} SET price = price * 2, name = upper(name), amount = amount - 1.5 "
        "WHERE region = 'north' OR name IS NULL",
        "UPDATE {t} SET region = 'west', d = DATE'2023-12-31' WHERE id % 10 = 3",
        f"INSERT INTO {{t}} {rows(range(120, 150))}",
        f"MERGE INTO {{t}} t USING ({rows(range(100, 170))}) s ON t.id = s.id "
        "WHEN MATCHED AND s.id % 9 = 0 THEN DELETE WHEN MATCHED THEN UPDATE SET qty = s.qty + 1, "
        "name = concat('m-', coalesce(s.name, '')), flag = NOT s.flag WHEN NOT MATCHED THEN INSERT *",
        "OPTIMIZE {t}",
        f"INSERT INTO {{t}} {rows(range(170, 200))}",
        "DELETE FROM {t} WHERE ts < TIMESTAMP'2024-02-01 00:00:00'",
    )


def cl_values(lo: int, hi: int) -> str:
    return ", ".join(f"({i}, {i * 7919 % 997}, 'n{i}')" for i in range(lo, hi))


CDF_COLUMNS = ["id", "part", "qty", "_change_type", "_commit_version", "_commit_ms"]
# The commit timestamp stays out of the golden record: without in-commit timestamps it is the
# commit file's modification time, which a checkout of the repository sets anew.
CHANGES_SQL = ("SELECT id, part, qty, _change_type, _commit_version FROM table_changes_by_path('{path}', 0)")
ROW_IDS_SQL = "SELECT id, _metadata.row_id, _metadata.row_commit_version FROM {t}"
CM_COLUMNS = ("id", "g", "s2", "st")
TW_COLUMNS = ("a", "f", "d", "dt", "b", "s")
V_COLUMNS = ("id", "v")
CL_COLUMNS = ("id", "k", "name")

GOLDEN_TABLES: tuple[GoldenTable, ...] = (
    GoldenTable("dml_spark", "every kind of commit (INSERT, DELETE, UPDATE of a partition column, MERGE, "
                "OPTIMIZE) over every common type, past a checkpoint", _dml_statements(), tuple(COLUMNS),
                versions=(1, 4, 6, 8, 9, 10)),
    GoldenTable("dv_spark", "deletion vectors, and checkpoints holding them", _dv_statements(""),
                ("id", "g", "s", "x"), versions=(2, 3)),
    GoldenTable("dv_spark_parted", "deletion vectors in a partitioned table", _dv_statements("PARTITIONED BY (g)"),
                ("id", "g", "s", "x"), versions=(2,)),
    GoldenTable("cm_name", "column mapping by name: a rename, a drop, a struct, deletion vectors",
                _cm_statements("name"), CM_COLUMNS, versions=(1,)),
    GoldenTable("cm_id", "column mapping by id", _cm_statements("id"), CM_COLUMNS),
    GoldenTable("v2ck_spark", "v2 checkpoints in Parquet, with sidecars", _v2_statements("parquet"), ("id", "g", "s")),
    GoldenTable("v2ck_json_spark", "v2 checkpoints in JSON, with sidecars", _v2_statements("json"), ("id", "g", "s")),
    GoldenTable("tw_spark", "type widening (int to bigint, float to double, decimal, byte to int)", (
        "CREATE TABLE {t} (a INT, f FLOAT, d DECIMAL(5,2), dt DATE, b TINYINT, s STRING) USING delta "
        "TBLPROPERTIES ('delta.enableTypeWidening' = 'true')",
        "INSERT INTO {t} SELECT CAST(id AS INT), CAST(id / 10 + 3.3 AS FLOAT), CAST(id / 4 AS DECIMAL(5,2)), "
        "date_add(DATE'2024-01-01', CAST(id AS INT)), CAST(id AS TINYINT), concat('old', id) FROM range(0, 12)",
        "ALTER TABLE {t} ALTER COLUMN a TYPE BIGINT",
        "ALTER TABLE {t} ALTER COLUMN f TYPE DOUBLE",
        "ALTER TABLE {t} ALTER COLUMN d TYPE DECIMAL(10,4)",
        "ALTER TABLE {t} ALTER COLUMN b TYPE INT",
        "INSERT INTO {t} SELECT 5000000000 + id, id / 7.0, CAST(123456.1234 + id AS DECIMAL(10,4)), "
        "date_add(DATE'2025-01-01', CAST(id AS INT)), 100000 + CAST(id AS INT), concat('new', id) FROM range(0, 8)",
    ), TW_COLUMNS, versions=(1,)),
    GoldenTable("variant_spark", "variant", (
        "CREATE TABLE {t} (id BIGINT, v VARIANT) USING delta",
        "INSERT INTO {t} SELECT id, parse_json(concat('{\"k\":', id, ',\"n\":{\"x\":\"', id, '\"}}')) "
        "FROM range(0, 30)",
    ), V_COLUMNS),
    GoldenTable("shred_spark", "shredded variant", (
        "CREATE TABLE {t} (id BIGINT, v VARIANT) USING delta TBLPROPERTIES ('delta.enableVariantShredding' = 'true')",
        "INSERT INTO {t} SELECT id, parse_json(concat('{\"k\":', id, ',\"t\":\"x', id, '\"}')) FROM range(0, 30)",
    ), V_COLUMNS),
    GoldenTable("cdf_spark", "the change data feed, with deletion vectors, through DELETE, UPDATE and MERGE", (
        "CREATE TABLE {t} (id BIGINT, part STRING, qty INT) USING delta PARTITIONED BY (part) TBLPROPERTIES "
        "('delta.enableChangeDataFeed' = 'true', 'delta.enableDeletionVectors' = 'true')",
        "INSERT INTO {t} SELECT id, concat('p', CAST(id % 3 AS STRING)), CAST(id % 10 AS INT) FROM range(0, 60)",
        "DELETE FROM {t} WHERE id % 7 = 0",
        "UPDATE {t} SET qty = qty + 100 WHERE qty < 3",
        "MERGE INTO {t} t USING (SELECT id, concat('p', CAST(id % 3 AS STRING)) AS part, 5 AS qty FROM range(50, 70)) s "
        "ON t.id = s.id WHEN MATCHED AND s.id % 4 = 0 THEN DELETE WHEN MATCHED THEN UPDATE SET * "
        "WHEN NOT MATCHED THEN INSERT *",
    ), ("id", "part", "qty"), queries=(("changes", CHANGES_SQL),)),
    GoldenTable("ck_spark", "CHECK and NOT NULL constraints", (
        "CREATE TABLE {t} (id BIGINT NOT NULL, qty INT, name STRING) USING delta",
        "INSERT INTO {t} VALUES (1, 1, 'a'), (2, 2, 'b')",
        "ALTER TABLE {t} ADD CONSTRAINT qty_pos CHECK (qty >= 0)",
    ), ("id", "qty", "name")),
    GoldenTable("gen_spark", "a generated column as partition column", (
        "CREATE TABLE {t} (id BIGINT, ts TIMESTAMP, d DATE GENERATED ALWAYS AS (CAST(ts AS DATE))) "
        "USING delta PARTITIONED BY (d)",
        "INSERT INTO {t} (id, ts) VALUES (1, TIMESTAMP'2024-01-05 03:00:00')",
    ), ("id", "ts", "d")),
    GoldenTable("id_spark", "an identity column", (
        "CREATE TABLE {t} (id BIGINT GENERATED ALWAYS AS IDENTITY (START WITH 5 INCREMENT BY 3), name STRING) "
        "USING delta",
        "INSERT INTO {t} (name) VALUES ('a'), ('b'), ('c')",
    ), ("id", "name")),
    GoldenTable("cl_spark", "liquid clustering: CLUSTER BY, OPTIMIZE, rows appended after it", (
        "CREATE TABLE {t} (id BIGINT, k INT, name STRING) USING delta CLUSTER BY (k)",
        f"INSERT INTO {{t}} VALUES {cl_values(0, 200)}",
        f"INSERT INTO {{t}} VALUES {cl_values(200, 300)}",
        "OPTIMIZE {t}",
        f"INSERT INTO {{t}} VALUES {cl_values(300, 350)}",
    ), CL_COLUMNS),
    GoldenTable("rt_spark", "row tracking: row ids and commit versions, kept through UPDATE", (
        "CREATE TABLE {t} (id BIGINT, v INT) USING delta TBLPROPERTIES ('delta.enableRowTracking' = 'true')",
        "INSERT INTO {t} SELECT id, CAST(id AS INT) FROM range(0, 10)",
        "UPDATE {t} SET v = v + 1 WHERE id < 3",
    ), ("id", "v"), queries=(("row_ids", ROW_IDS_SQL),)),
)
GOLDEN = {g.name: g for g in GOLDEN_TABLES}


# ---------------------------------------------------------------- what skiplake writes

def build_main(spark, lake) -> dict[str, int]:
    """The main table through every kind of commit, past a checkpoint at version 10."""
    t = lake.create_table("main", SCHEMA, partition_by=PARTITION_BY)
    v = {"create": t.version}
    v["append1"] = t.append(frame(spark, range(0, 40)))
    v["append2"] = t.append(frame(spark, range(40, 80)))
    v["append3"] = t.append(frame(spark, range(80, 120)))
    v["delete"] = t.delete("qty > 18 OR (d = DATE'2024-01-02' AND flag)")
    v["update"] = t.update("region = 'north' OR name IS NULL",
                           {"price": "price * 2", "name": "upper(name)", "amount": "amount - 1.5"})
    v["update_partition"] = t.update("id % 10 = 3", {"region": "'west'", "d": "DATE'2023-12-31'"})
    v["append4"] = t.append(frame(spark, range(120, 150)))
    src = frame(spark, range(100, 170)).selectExpr(
        "id", "qty + 1 AS qty", "price", "amount", "concat('m-', coalesce(name, '')) AS name", "d", "ts",
        "NOT flag AS flag", "region")
    v["merge"] = t.merge(src, "target.id = source.id", when_matched_update="*",
                         when_matched_delete="source.id % 9 = 0", when_not_matched_insert="*")
    v["optimize"] = t.optimize().version
    v["append5"] = t.append(frame(spark, range(170, 200)))
    v["delete_after_checkpoint"] = t.delete("ts < TIMESTAMP'2024-02-01 00:00:00'")
    v["update_after_checkpoint"] = t.update("flag IS NULL", {"flag": "true", "ts": "ts + INTERVAL 1 SECOND"})
    v["append6"] = t.append(frame(spark, range(200, 215)))
    return v


# Versions read back with versionAsOf: every kind of commit; append5 is version 10 (read through
# the Parquet checkpoint), delete_after_checkpoint is 11 (checkpoint + one JSON commit).
TIME_TRAVEL_STEPS = ["append1", "delete", "update", "update_partition", "merge", "optimize", "append5",
                     "delete_after_checkpoint"]
DV_OURS = "dv_ours"


def build_dv_ours(spark, lake) -> list[tuple]:
    """skiplake's deletion vectors (DELETE twice, UPDATE, MERGE); its rows as skiplake reads them."""
    dv = lake.create_table(DV_OURS, SCHEMA, partition_by=PARTITION_BY,
                           properties={"delta.enableDeletionVectors": "true"})
    dv.append(frame(spark, range(0, 120)).repartition(2))
    dv.delete("qty > 15")
    dv.delete("id % 5 = 0")
    dv.update("id % 7 = 1", {"name": "'upd'"})
    dv.merge(frame(spark, range(100, 130)), "target.id = source.id", when_matched_delete="source.id % 2 = 0",
             when_matched_update={"name": "'merged'"}, when_not_matched_insert="*")
    return rows_as_strings(dv.read(), COLUMNS)


CM_OURS = "cm_ours"
CM_OURS_COLUMNS = ["id", "grp", "label", "st"]


def build_column_mapped(spark, lake) -> list[tuple]:
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


V2_OURS, VARIANT_OURS = "v2ck_ours", "variant_ours"


def build_feature_tables(spark, lake) -> dict[str, list]:
    """skiplake's tables with v2 checkpoints (sidecars) and with a variant column."""
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


CDF_OURS, CDF_OURS_DV = "cdf_ours", "cdf_ours_dv"
CDF_SCHEMA = "id long, part string, qty int"


def cdf_rows(spark, lo: int, hi: int):
    return spark.sql(f"SELECT id, concat('p', CAST(id % 3 AS STRING)) AS part, CAST(id % 10 AS INT) AS qty "
                     f"FROM range({lo}, {hi})")


def changes_as_strings(df, with_time: bool = True) -> list[tuple]:
    """A change feed's rows as strings; with_time adds the commit timestamp in milliseconds."""
    if not with_time:
        return rows_as_strings(df, CDF_COLUMNS[:-1])
    return rows_as_strings(df.selectExpr("*", "unix_millis(_commit_timestamp) AS _commit_ms"), CDF_COLUMNS)


def changes_sql(path: str, with_time: bool = True) -> str:
    """delta-spark's table_changes over a path, in the columns of changes_as_strings."""
    columns = "id, part, qty, _change_type, _commit_version"
    if with_time:
        columns += ", unix_millis(_commit_timestamp) AS _commit_ms"
    return f"SELECT {columns} FROM table_changes_by_path('{path}', 0)"


def build_change_feed_tables(spark, lake) -> dict[str, list]:
    """Tables with the change data feed, through every DML, for delta-spark's table_changes."""
    out = {}
    for name, properties, parts in ((CDF_OURS, {}, None), (CDF_OURS_DV, {"delta.enableDeletionVectors": "true"},
                                                           ["part"])):
        t = lake.create_table(name, CDF_SCHEMA, partition_by=parts,
                              properties={"delta.enableChangeDataFeed": "true", **properties})
        t.append(cdf_rows(spark, 0, 60).repartition(3))
        t.delete("id % 7 = 0")
        t.update("qty < 3", {"qty": "qty + 100"})
        t.delete("id >= 50")
        src = cdf_rows(spark, 40, 80).selectExpr("id", "part", "CAST(qty * 2 AS INT) AS qty")
        (t.merge(src, "target.id = source.id").when_matched_delete("source.id % 4 = 0").when_matched_update_all()
         .when_not_matched_insert_all().execute())
        t.overwrite(cdf_rows(spark, 1000, 1010), where="id >= 70")
        out[name] = changes_as_strings(t.changes(0))
    return out


CK_OURS, GEN_OURS, ID_OURS = "ck_ours", "gen_ours", "id_ours"


def build_constraint_tables(spark, lake) -> None:
    """skiplake's tables with a CHECK constraint and NOT NULL, a generated column and an identity column."""
    t = lake.create_table(CK_OURS, "id long not null, qty int, name string")
    t.append(spark.sql("SELECT id, CAST(id % 10 AS INT) AS qty, concat('n', id) AS name FROM range(0, 10)"))
    t.add_constraint("qty_pos", "qty >= 0")
    g = lake.create_table(GEN_OURS, "id long, ts timestamp, d date", partition_by=["d"],
                          generated_columns={"d": "CAST(ts AS DATE)"})
    g.append(spark.sql("SELECT id, TIMESTAMP'2024-05-01 12:00:00' AS ts FROM range(0, 3)"))
    from skiplake import IdentityColumn
    i = lake.create_table(ID_OURS, "id long, name string", identity_columns={"id": IdentityColumn(start=1, step=1)})
    i.append(spark.sql("SELECT concat('ours', id) AS name FROM range(0, 4)").repartition(2))


CL_OURS = "cl_ours"


def cl_rows(spark, lo: int, hi: int):
    return spark.sql(f"SELECT id, CAST(id * 7919 % 997 AS INT) AS k, concat('n', id) AS name FROM range({lo}, {hi})")


def build_clustered_table(spark, lake) -> None:
    """skiplake's clustered table: one cube, then an append not yet clustered."""
    t = lake.create_table(CL_OURS, "id long, k int, name string", cluster_by=["k", "id"])
    t.append(cl_rows(spark, 0, 300).repartition(2))
    t.optimize(target_file_size=2048)
    t.append(cl_rows(spark, 300, 400).repartition(1))


RT_OURS = "rt_ours"


def ids_of(t) -> list[tuple]:
    """A table's (id, row id, row commit version) as strings, as ROW_IDS_SQL gives them."""
    return sorted((str(r.id), str(r._row_id), str(r._row_commit_version)) for r in t.read(with_row_ids=True).collect())


def build_row_tracking_table(spark, lake) -> None:
    t = lake.create_table(RT_OURS, "id long, v int", properties={"delta.enableRowTracking": "true"})
    t.append(spark.sql("SELECT id, CAST(id AS INT) AS v FROM range(0, 20)").repartition(2))
    t.update("id = 3", {"v": "v + 100"})
    t.delete("id >= 18")
