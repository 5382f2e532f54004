"""A table's rules applied to rows written without Spark (skiplake.txn.arrow_rules through
skiplake.txn.arrow_writes.write_task): generated columns computed, identity values assigned and
their high-water mark moved by the commit, CHECK constraints and given generated values
checked, rows placed in Spark's buckets, and rules that cannot be evaluated refused before
anything is written. Pure Python: real files and a real log, no Spark."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from skiplake.errors import ConstraintViolationError, SchemaMismatchError, WriterFeatureUnsupportedError
from skiplake.layout.bucket_spec import BucketSpec, bucket_id_of_tags
from skiplake.layout.bucketing import bucket_ids
from skiplake.log.actions import Metadata
from skiplake.log.schema import Field, Schema
from skiplake.log.snapshot import Snapshot
from skiplake.txn.arrow_writes import FileWritePlan, write_task
from skiplake.txn.commit import create
from skiplake.txn.constraints import with_constraint, with_generated_columns
from skiplake.txn.file_commits import FileCommit, commit_files
from skiplake.txn.identity import IdentityColumn, identity_columns, with_identity_columns

UTC = dt.timezone.utc


def _table(tmp_path, constraints=(("qty_positive", "qty > 0"),), config=None):
    schema = Schema((Field("id", "long"), Field("qty", "integer"), Field("ts", "timestamp"), Field("day", "date")))
    schema = with_generated_columns("t", schema, {"day": "CAST(ts AS DATE)"})
    schema = with_identity_columns("t", schema, {"id": IdentityColumn(start=10, step=5)})
    metadata = Metadata.new(schema, [], dict(config or {}))
    for name, expression in constraints:
        metadata = with_constraint("t", metadata, name, expression)
    path = str(tmp_path / "t")
    create(path, metadata)
    return path


def _batch(qty, hour=22, **extra):
    columns = {"qty": pa.array(qty, pa.int32()),
               "ts": pa.array([dt.datetime(2024, 3, 1, hour, 0, tzinfo=UTC)] * len(qty), pa.timestamp("us", "UTC"))}
    columns.update(extra)
    return pa.RecordBatch.from_pydict(columns)


def _write(path, batches, task=0, zone="UTC"):
    snapshot = Snapshot.load(path)
    plan = FileWritePlan.of(path, snapshot.metadata, snapshot.column_mapping, batches[0].schema.names)
    files = write_task(plan, batches, task, zone)
    commit_files(FileCommit(path, tuple(files.adds), read_version=snapshot.version,
                            identity_values=tuple((n, (v,)) for n, v in files.marks.items())))
    return files


def _rows(path):
    import pyarrow.parquet as pq
    snapshot = Snapshot.load(path)
    return pa.concat_tables([pq.read_table(f"{path}/{f.path}") for f in snapshot.add_files]).to_pylist()


def test_identity_and_generated_columns_are_filled_in(tmp_path):
    path = _table(tmp_path)
    _write(path, [_batch([1, 2]), _batch([3])], task=0)
    _write(path, [_batch([4])], task=3, zone="America/Los_Angeles")
    rows = _rows(path)
    ids = sorted(r["id"] for r in rows)
    assert ids[:3] == [10, 15, 20]                                   # start, then step, within a task
    assert ids[3] == 20 + 5 * (1 + (3 << 33))                        # past the mark, task 3's range
    mark = identity_columns(Snapshot.load(path).schema)["id"].high_water_mark
    assert mark == ids[-1]
    days = {r["qty"]: r["day"] for r in rows}
    assert days[1] == dt.date(2024, 3, 1) and days[4] == dt.date(2024, 3, 1)   # 22:00 UTC is 14:00 in LA
    _write(path, [_batch([5], hour=23)], zone="Asia/Tokyo")
    assert {r["qty"]: r["day"] for r in _rows(path)}[5] == dt.date(2024, 3, 2)


def test_broken_rules_are_refused_with_the_row(tmp_path):
    path = _table(tmp_path)
    version = Snapshot.load(path).version
    with pytest.raises(ConstraintViolationError, match=r"CHECK constraint qty_positive \(qty > 0\): qty = -1"):
        _write(path, [_batch([3, -1])])
    with pytest.raises(ConstraintViolationError, match="generated column day"):
        _write(path, [_batch([3], day=pa.array([dt.date(2000, 1, 1)], pa.date32()))])
    with pytest.raises(SchemaMismatchError, match="GENERATED ALWAYS"):
        _write(path, [_batch([3], id=pa.array([1], pa.int64()))])
    _write(path, [_batch([3], day=pa.array([dt.date(2024, 3, 1)], pa.date32()))])   # the right value passes
    assert Snapshot.load(path).version == version + 1


def test_a_rule_that_cannot_be_evaluated_is_refused_before_writing(tmp_path):
    path = _table(tmp_path, constraints=(("ratio", "qty / 2 < 100"),))
    snapshot = Snapshot.load(path)
    with pytest.raises(WriterFeatureUnsupportedError) as e:
        FileWritePlan.of(path, snapshot.metadata, "none", ["qty", "ts"])
    assert "CHECK constraint ratio" in str(e.value) and "t.append" in str(e.value)
    assert not list((tmp_path / "t").glob("*.parquet"))


def test_rows_go_to_the_bucket_spark_would_choose(tmp_path):
    schema = Schema((Field("k", "string"), Field("v", "long")))
    spec = BucketSpec(8, ["k"], sort_by=["v"])
    path = str(tmp_path / "b")
    create(path, Metadata.new(schema, [], spec.to_configuration()))
    keys = [f"key{i % 11}" for i in range(100)]
    batch = pa.RecordBatch.from_pydict({"k": pa.array(keys), "v": pa.array(list(range(100, 0, -1)), pa.int64())})
    files = _write(path, [batch])
    import pyarrow.parquet as pq
    for f in files.adds:
        table = pq.read_table(f"{path}/{f.path}")
        expected = bucket_ids([table.column("k")], ["string"], 8)
        assert set(expected.tolist()) == {bucket_id_of_tags(f.tags)}
        assert f.path.split("_")[-1].startswith(f"{bucket_id_of_tags(f.tags):05d}.")
        assert table.column("v").to_pylist() == sorted(table.column("v").to_pylist())
    assert sum(f.num_records or 0 for f in files.adds) == 100
