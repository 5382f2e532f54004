"""CHECK constraints, invariants and NOT NULL columns: kept by every write, refused with a typed
error naming the rule and a row, with nothing written. delta-spark's side is in
tests/test_delta_spark_reads.py, tests/test_golden_tables.py and tests/test_delta_spark_writes.py."""
from __future__ import annotations

import json

import pytest

from skiplake.errors import ConstraintViolationError, InvalidArgumentError
from skiplake.log.schema import Field, Schema
from skiplake.log.snapshot import Snapshot

pytestmark = pytest.mark.spark

SCHEMA = "id long, qty int, name string"


def _rows(spark, lo: int, hi: int, qty: str = "CAST(id % 10 AS INT)"):
    return spark.sql(f"SELECT id, {qty} AS qty, concat('n', id) AS name FROM range({lo}, {hi})")


def _unchanged(t, version: int, rows: int) -> None:
    snap = Snapshot.load(t.path)
    assert snap.version == version and t.read().count() == rows


def test_add_constraint_checks_existing_rows_and_every_write(lake, spark):
    t = lake.create_table("t", SCHEMA)
    t.append(_rows(spark, 0, 20))
    with pytest.raises(ConstraintViolationError, match=r"already in the table.*qty_small.*qty = 9") as e:
        t.add_constraint("qty_small", "qty < 9")
    assert "qty < 9" in str(e.value)
    _unchanged(t, 1, 20)
    v = t.add_constraint("Qty_Positive", "qty >= 0 AND id IS NOT NULL")
    assert t.constraints == {"qty_positive": "qty >= 0 AND id IS NOT NULL"}
    p = t.snapshot.protocol
    assert (p.minReaderVersion, p.minWriterVersion) == (1, 7)
    assert set(p.writerFeatures or ()) == {"appendOnly", "invariants", "checkConstraints"}
    assert t.history(1)[0]["operation"] == "ADD CONSTRAINT"

    with pytest.raises(ConstraintViolationError, match=r"a row of the write breaks the CHECK constraint qty_positive"
                                                       r".*id = 25, qty = -1"):
        t.append(_rows(spark, 20, 30, "CAST(IF(id = 25, -1, 1) AS INT)"))
    _unchanged(t, v, 20)
    with pytest.raises(ConstraintViolationError, match="qty = NULL"):   # NULL is not TRUE: a violation
        t.append(_rows(spark, 20, 21, "CAST(NULL AS INT)"))
    with pytest.raises(ConstraintViolationError, match="qty_positive"):
        t.update("id = 3", {"qty": "-5"})
    src = _rows(spark, 18, 22, "CAST(-1 AS INT)")
    with pytest.raises(ConstraintViolationError, match="qty_positive"):
        t.merge(src, "target.id = source.id").when_not_matched_insert_all().execute()
    _unchanged(t, v, 20)

    t.append(_rows(spark, 20, 30))
    t.update("id = 3", {"qty": "qty + 1"})
    t.delete("id < 2")
    assert t.read().count() == 28
    with pytest.raises(InvalidArgumentError, match="already has a constraint qty_positive"):
        t.add_constraint("qty_positive", "qty > 1")
    t.drop_constraint("QTY_POSITIVE")
    assert t.constraints == {}
    t.append(_rows(spark, 100, 101, "CAST(-7 AS INT)"))
    with pytest.raises(InvalidArgumentError, match="no constraint"):
        t.drop_constraint("qty_positive")
    before = t.version
    assert t.drop_constraint("qty_positive", if_exists=True) == before


def test_constraint_refusals(lake, spark):
    t = lake.create_table("t", SCHEMA)
    with pytest.raises(InvalidArgumentError, match="not an expression over the table's columns"):
        t.add_constraint("c1", "no_such_column > 0")
    with pytest.raises(InvalidArgumentError, match="not a constraint name"):
        t.add_constraint("bad name", "qty > 0")
    with pytest.raises(InvalidArgumentError, match="add_constraint"):
        t.set_properties({"delta.constraints.c2": "qty > 0"})
    with pytest.raises(InvalidArgumentError, match="add_constraint"):
        lake.create_table("u", SCHEMA, properties={"delta.constraints.c2": "qty > 0"})
    assert t.version == 0


def test_not_null_and_invariants(lake, spark):
    invariant = json.dumps({"expression": {"expression": "qty < 100"}})
    schema = Schema((Field("id", "long", False), Field("qty", "integer", True, {"delta.invariants": invariant}),
                     Field("name", "string")))
    t = lake.create_table("t", schema)
    t.append(_rows(spark, 0, 5))
    with pytest.raises(ConstraintViolationError, match="NOT NULL constraint on column id"):
        t.append(spark.sql("SELECT CAST(NULL AS BIGINT) AS id, 1 AS qty, 'x' AS name"))
    with pytest.raises(ConstraintViolationError, match=r"invariant on qty \(qty < 100\): qty = 100"):
        t.append(_rows(spark, 5, 6, "100"))
    with pytest.raises(ConstraintViolationError, match="invariant on qty"):
        t.update("id = 1", {"qty": "500"})
    _unchanged(t, 1, 5)


def test_generated_columns(lake, spark):
    t = lake.create_table("t", "id long, ts timestamp, d date, label string", partition_by=["d"],
                          generated_columns={"d": "CAST(ts AS DATE)", "label": "concat('id-', id)"})
    p = t.snapshot.protocol
    assert "generatedColumns" in (p.writerFeatures or ()) and p.minWriterVersion == 7
    t.append(spark.sql("SELECT id, TIMESTAMP'2024-03-01 10:00:00' + make_interval(0, 0, 0, CAST(id AS INT)) AS ts "
                       "FROM range(0, 6)"))
    rows = {r.id: r for r in t.read().collect()}
    assert str(rows[2].d) == "2024-03-03" and rows[2].label == "id-2"
    assert t.scan("d = DATE'2024-03-03'").report.files_selected == 1
    # Given values are checked: a wrong one is refused, a right one kept.
    with pytest.raises(ConstraintViolationError, match=r"generated column d \(d = CAST\(ts AS DATE\)\)"):
        t.append(spark.sql("SELECT 9L AS id, TIMESTAMP'2024-03-09 00:00:00' AS ts, DATE'2000-01-01' AS d"))
    t.append(spark.sql("SELECT 9L AS id, TIMESTAMP'2024-03-09 00:00:00' AS ts, DATE'2024-03-09' AS d"))
    # An update of a column a generated column reads recomputes it.
    t.update("id = 1", {"ts": "TIMESTAMP'2025-01-01 00:00:00'", "id": "100"})
    moved = t.read("id = 100").collect()[0]
    assert str(moved.d) == "2025-01-01" and moved.label == "id-100"
    with pytest.raises(ConstraintViolationError, match="generated column label"):
        t.update("id = 2", {"label": "'other'"})
    # MERGE computes them for inserted and updated rows.
    src = spark.sql("SELECT id, TIMESTAMP'2026-06-06 06:00:00' AS ts FROM range(4, 8)")
    t.merge(src, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all().execute()
    got = {r.id: (str(r.d), r.label) for r in t.read("id >= 4 AND id < 8").collect()}
    assert got == {i: ("2026-06-06", f"id-{i}") for i in range(4, 8)}
    with pytest.raises(InvalidArgumentError, match="reads the generated column"):
        lake.create_table("u", "a long, b long, c long", generated_columns={"b": "a + 1", "c": "b + 1"})


def test_identity_columns(lake, spark):
    from skiplake import IdentityColumn
    t = lake.create_table("t", "id long, name string", identity_columns={"id": IdentityColumn(start=10, step=5)})
    p = t.snapshot.protocol
    assert "identityColumns" in (p.writerFeatures or ())
    t.append(spark.sql("SELECT concat('a', id) AS name FROM range(0, 20)").repartition(3))
    first = [r.id for r in t.read().collect()]
    assert len(set(first)) == 20 and min(first) >= 10 and all((v - 10) % 5 == 0 for v in first)
    mark = t.log_schema.field("id").metadata["delta.identity.highWaterMark"]
    assert mark == max(first)
    t.append(spark.sql("SELECT 'b' AS name"))
    second = t.read("name = 'b'").collect()[0].id
    assert second > mark and (second - 10) % 5 == 0
    with pytest.raises(Exception, match="GENERATED ALWAYS AS IDENTITY"):
        t.append(spark.sql("SELECT 1L AS id, 'c' AS name"))
    with pytest.raises(InvalidArgumentError, match="identity column"):
        t.update("name = 'b'", {"id": "0"})
    # MERGE assigns values to inserted rows and keeps those of updated ones.
    src = spark.sql("SELECT * FROM VALUES ('b', 'x'), ('new1', 'y'), ('new2', 'z') AS s(name, tag)")
    (t.merge(src, "target.name = source.name").when_matched_update(set={"name": "concat(target.name, source.tag)"})
     .when_not_matched_insert(values={"name": "source.name"}).execute())
    rows = {r.name: r.id for r in t.read().collect()}
    assert rows["bx"] == second and len(set(rows.values())) == len(rows) == 23
    assert rows["new1"] > second and rows["new2"] > second
    # GENERATED BY DEFAULT takes given values.
    u = lake.create_table("u", "id long, name string",
                          identity_columns={"id": IdentityColumn(start=-1, step=-1, always=False)})
    u.append(spark.sql("SELECT 100L AS id, 'given' AS name"))
    u.append(spark.sql("SELECT 'assigned' AS name FROM range(0, 3)"))
    got = {r.name: r.id for r in u.read().collect()}
    assert got["given"] == 100 and all(v < 0 for k, v in got.items() if k != "given")


def test_identity_values_never_repeat_under_concurrent_writers(lake, spark):
    from skiplake import IdentityColumn
    from skiplake.errors import ConcurrentModificationError
    t = lake.create_table("t", "id long, name string", identity_columns={"id": IdentityColumn()})
    first, second = t.begin(), t.begin()
    first.append(spark.sql("SELECT 'first' AS name FROM range(0, 3)"))
    second.append(spark.sql("SELECT 'second' AS name FROM range(0, 3)"))
    first.commit()
    with pytest.raises(ConcurrentModificationError):
        second.commit()
    t.append(spark.sql("SELECT 'retried' AS name FROM range(0, 3)"))
    ids = [r.id for r in t.refresh().read().collect()]
    assert len(ids) == len(set(ids)) == 6


def test_identity_values_in_the_change_feed_are_the_tables(lake, spark):
    from skiplake import IdentityColumn
    t = lake.create_table("t", "id long, name string", identity_columns={"id": IdentityColumn()},
                          properties={"delta.enableChangeDataFeed": "true"})
    t.append(spark.sql("SELECT concat('a', id) AS name FROM range(0, 4)"))
    src = spark.sql("SELECT concat('a', id) AS name FROM range(2, 9)").repartition(3)
    t.merge(src, "target.name = source.name").when_not_matched_insert_all().when_matched_delete().execute()
    inserted = {(r.id, r.name) for r in t.changes(2, 2).filter("_change_type = 'insert'").collect()}
    assert inserted == {(r.id, r.name) for r in t.read("name NOT IN ('a0', 'a1')").collect()}
    assert len(inserted) == 5


def test_delta_rs_keeps_skiplakes_rules(lake, spark):
    """delta-rs refuses a row breaking skiplake's CHECK constraint and computes its generated
    column; skiplake reads what delta-rs wrote."""
    deltalake = pytest.importorskip("deltalake")
    import pyarrow as pa
    # An expression both engines know (delta-rs evaluates it with DataFusion).
    t = lake.create_table("t", "id long, qty int, total long", generated_columns={"total": "id + qty"})
    t.append(spark.sql("SELECT 1L AS id, 1 AS qty"))
    t.add_constraint("qty_pos", "qty >= 0")
    good = pa.table({"id": pa.array([2], pa.int64()), "qty": pa.array([3], pa.int32())})
    deltalake.write_deltalake(t.path, good, mode="append")
    bad = pa.table({"id": pa.array([3], pa.int64()), "qty": pa.array([-3], pa.int32())})
    with pytest.raises(Exception, match="failed validation"):
        deltalake.write_deltalake(t.path, bad, mode="append")
    rows = {r.id: (r.qty, r.total) for r in t.refresh().read().collect()}
    assert rows == {1: (1, 2), 2: (3, 5)}
