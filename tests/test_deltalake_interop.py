"""delta-rs (the `deltalake` package) and skiplake agree on every row, both ways."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

deltalake = pytest.importorskip("deltalake")

from skiplake.log.snapshot import Snapshot  # noqa: E402
from skiplake.table import Table  # noqa: E402

pytestmark = pytest.mark.spark


def normalize(value):
    if isinstance(value, dt.datetime):
        value = value.replace(tzinfo=None) if value.tzinfo is None else value.astimezone(
            dt.timezone.utc).replace(tzinfo=None)
        return value.isoformat()
    if isinstance(value, (dt.date, Decimal)):
        return str(value)
    return value


def rs_rows(path: str, version: int | None = None, columns: list[str] | None = None) -> list[tuple]:
    t = deltalake.DeltaTable(path, version=version)
    data = t.to_pyarrow_table()
    cols = columns or data.column_names
    return sorted((tuple(normalize(r[c]) for c in cols) for r in data.to_pylist()), key=repr)


def sk_rows(table: Table, version: int | None = None, columns: list[str] | None = None) -> list[tuple]:
    df = table.read(version=version)
    cols = columns or df.columns
    return sorted((tuple(normalize(r[c]) for c in cols) for r in df.collect()), key=repr)


COLUMNS = ["id", "d", "cat", "qty", "price", "score", "ts", "flag"]


def source(spark, n: int, start: int = 0):
    return spark.sql(f"""
        SELECT id, date_add(DATE'2001-01-01', CAST(id % 3 AS INT)) AS d,
               CASE WHEN id % 5 = 0 THEN NULL ELSE concat('c', CAST(id % 4 AS STRING)) END AS cat,
               CAST(id % 100 AS INT) AS qty, CAST(id / 8 AS DECIMAL(7,2)) AS price,
               CAST(id AS DOUBLE) / 3 AS score,
               TIMESTAMP'2021-01-01 00:00:00' + make_interval(0,0,0,0,0,0,id) AS ts, id % 2 = 0 AS flag
        FROM range({start}, {start + n})""")


def test_delta_rs_reads_every_kind_of_skiplake_table(lake, spark):
    t = lake.create_table("interop", "id long, d date, cat string, qty int, price decimal(7,2), "
                          "score double, ts timestamp, flag boolean", partition_by=["d", "cat"])
    t.append(source(spark, 200))
    assert rs_rows(t.path, columns=COLUMNS) == sk_rows(t, columns=COLUMNS)
    t.delete("qty < 10")
    assert rs_rows(t.path, columns=COLUMNS) == sk_rows(t, columns=COLUMNS)
    t.update("cat = 'c1'", {"qty": "qty * 2"})
    assert rs_rows(t.path, columns=COLUMNS) == sk_rows(t, columns=COLUMNS)
    t.merge(source(spark, 50, start=180), on="target.id = source.id", when_matched_update="*",
            when_not_matched_insert="*")
    assert rs_rows(t.path, columns=COLUMNS) == sk_rows(t, columns=COLUMNS)
    t.optimize()
    assert rs_rows(t.path, columns=COLUMNS) == sk_rows(t, columns=COLUMNS)
    for i in range(6):  # past the checkpoint at version 10
        t.append(source(spark, 5, start=1000 + i * 5))
    assert t.version >= 10
    assert rs_rows(t.path, columns=COLUMNS) == sk_rows(t, columns=COLUMNS)
    assert deltalake.DeltaTable(t.path).version() == t.version
    # Time travel agrees too.
    assert rs_rows(t.path, version=2, columns=COLUMNS) == sk_rows(t, version=2, columns=COLUMNS)
    # delta-rs sees skiplake's stats, partitioning and history.
    rs = deltalake.DeltaTable(t.path)
    assert rs.metadata().partition_columns == ["d", "cat"]
    actions = pa.table(rs.get_add_actions(flatten=True)).to_pylist()
    assert all(a["num_records"] > 0 for a in actions)
    assert rs.history(1)[0]["operation"] == "WRITE"


def test_skiplake_reads_delta_rs_tables(spark, tmp_path):
    path = str(tmp_path / "rs")
    data = pa.table({
        "id": pa.array(range(100), pa.int64()),
        "part": pa.array([f"p{i % 3}" for i in range(100)]),
        "when": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=i % 4) for i in range(100)]),
        "value": pa.array([i / 7 for i in range(100)]),
        "name": pa.array([None if i % 9 == 0 else f"n{i}" for i in range(100)]),
    })
    deltalake.write_deltalake(path, data, partition_by=["part", "when"])
    for i in range(11):
        deltalake.write_deltalake(path, data.slice(i * 5, 5), mode="append", partition_by=["part", "when"])
    rs = deltalake.DeltaTable(path)
    rs.delete("id < 10")
    rs.create_checkpoint()
    t = Table.open(spark, path)
    assert t.version == rs.version()
    assert t.partition_by == ["part", "when"]
    assert sk_rows(t) == rs_rows(path, columns=t.read().columns)
    assert t.read("part = 'p1' AND id >= 50").count() == sum(
        1 for r in deltalake.DeltaTable(path).to_pyarrow_table().to_pylist() if r["part"] == "p1" and r["id"] >= 50)
    # The checkpoint written by delta-rs is what skiplake starts from.
    snap = Snapshot.load(path)
    assert snap.num_files == len(rs.file_uris())
    # skiplake writes to a delta-rs table, and delta-rs reads the result.
    t.append(spark.createDataFrame([(1000, "p9", dt.date(2030, 1, 1), 1.0, "x")], t.schema))
    assert deltalake.DeltaTable(path).to_pyarrow_table().num_rows == t.read().count()


def test_delta_rs_reads_skiplakes_deletion_vectors_through_datafusion(lake, spark):
    # delta-rs applies DVs in its DataFusion reader (QueryBuilder); its pyarrow readers refuse a
    # table with the deletionVectors reader feature (README: known limits).
    t = lake.create_table("dv", "id long, cat string, qty int", partition_by=["cat"],
                          properties={"delta.enableDeletionVectors": "true"})
    t.append(spark.range(0, 400).selectExpr("id", "concat('c', CAST(id % 3 AS STRING)) AS cat",
                                            "CAST(id % 50 AS INT) AS qty").repartition(2))
    t.delete("qty = 7 OR id % 9 = 0")
    t.update("id % 11 = 0", {"qty": "qty + 100"})
    assert any(f.deletionVector for f in t.snapshot.add_files)
    ours = sorted((r.id, r.cat, r.qty) for r in t.read().collect())
    dt_ = deltalake.DeltaTable(t.path)
    got = deltalake.QueryBuilder().register("dv", dt_).execute("SELECT id, cat, qty FROM dv").read_all()
    theirs = sorted(zip(*(got.column(c).to_pylist() for c in ("id", "cat", "qty"))))
    assert theirs == ours and len(ours) < 400
    with pytest.raises(Exception, match="(?i)deletion"):
        dt_.to_pyarrow_table()
