"""Typed stats in checkpoints: written as stats_parsed/partitionValues_parsed, and planning from
them gives exactly what planning from the JSON stats gives."""
from __future__ import annotations

import json
import os
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skiplake.log.actions import AddFile, CommitInfo, Metadata, Protocol, RemoveFile, now_ms
from skiplake.log.commit_files import put_commit, put_first_commit
from skiplake.log.schema import Field, Schema
from skiplake.log.snapshot import LOG_DIR, Snapshot, checkpoint_name
from skiplake.skipping.plan import plan_scan, stats_table
from skiplake.skipping.stats_table import StatsTable

SCHEMA = Schema((Field("id", "long"), Field("qty", "integer"), Field("price", "double"), Field("ratio", "float"),
                 Field("amount", "decimal(9,2)"), Field("name", "string"), Field("ts", "timestamp"),
                 Field("day", "date"), Field("flag", "boolean"), Field("p", "integer")))
COLUMNS = [f.name for f in SCHEMA.fields if f.name != "p"]


def _stats(rng: random.Random, i: int) -> str | None:
    if i % 17 == 3:
        return None  # a file without stats
    lo, hi = sorted(rng.randint(-1000, 1000) for _ in range(2))
    mins = {"id": lo, "qty": lo // 3, "price": lo / 7, "ratio": round(lo / 9, 3), "amount": lo + 0.25,
            "name": f"n{lo:05d}", "ts": f"2024-01-{1 + i % 28:02d}T0{i % 10}:00:00.123Z",
            "day": f"2024-02-{1 + i % 28:02d}"}
    maxs = {"id": hi, "qty": hi // 3, "price": hi / 7, "ratio": round(hi / 9, 3), "amount": hi + 0.75,
            "name": f"n{hi:05d}" + ("x" * 40 if i % 5 == 0 else ""), "ts": f"2024-03-{1 + i % 28:02d}T10:00:00.999Z",
            "day": f"2024-04-{1 + i % 28:02d}"}
    if i % 7 == 0:
        del mins["price"], maxs["price"]  # a column without bounds in some files
    nulls = {c: (rng.randint(0, 3) if c != "id" else 0) for c in COLUMNS}
    return json.dumps({"numRecords": 10 + i, "minValues": mins, "maxValues": maxs, "nullCount": nulls})


def _table(root: str, configuration: dict[str, str] | None = None, remove_after_checkpoint: bool = False) -> str:
    rng = random.Random(7)
    snapshot = put_first_commit(root, CommitInfo(1, "CREATE TABLE"), Protocol(1, 2),
                                Metadata.new(SCHEMA, ["p"], {"delta.enableExpiredLogCleanup": "false",
                                                             **(configuration or {})}))
    for v in range(1, 13):  # a checkpoint at 10, then two commits of JSON stats
        adds = [AddFile(f"p={i % 3}/f{v}-{i}.parquet", {"p": str(i % 3) if i % 4 else None}, 100, 1, True,
                        _stats(rng, v * 10 + i)) for i in range(10)]
        removes = [RemoveFile(f"p=1/f{v - 3}-1.parquet", now_ms(), True)] if remove_after_checkpoint and v == 12 else []
        put_commit(snapshot, CommitInfo(1, "WRITE"), adds + removes)
        snapshot = Snapshot.load(root)
    return root


def _values(bounds):
    """Bounds as one array: typed stats keep the chunks they were read in."""
    return bounds.combine_chunks() if isinstance(bounds, pa.ChunkedArray) else bounds


def _same(a, b) -> None:
    assert _values(a.min).equals(_values(b.min)) and _values(a.max).equals(_values(b.max))
    for attr in ("may_null", "all_null", "exact"):
        assert np.array_equal(getattr(a, attr), getattr(b, attr)), attr


@pytest.mark.parametrize("remove_after_checkpoint", [False, True])
def test_checkpoints_carry_typed_stats_and_planning_from_them_equals_json(tmp_path, remove_after_checkpoint):
    # Without a remove, the snapshot's files start with the checkpoint's in order; a remove of
    # a checkpointed file since shifts them, and files are matched to typed stats by path.
    root = _table(str(tmp_path / "t"), remove_after_checkpoint=remove_after_checkpoint)
    cp = pq.read_table(os.path.join(root, LOG_DIR, checkpoint_name(10)))
    add_type = cp.schema.field("add").type
    stats_type = add_type.field("stats_parsed").type
    assert stats_type.field("minValues").type.field("amount").type == pa.decimal128(9, 2)
    assert stats_type.field("minValues").type.field("ts").type == pa.timestamp("us", "UTC")
    assert add_type.field("partitionValues_parsed").type == pa.struct([("p", pa.int32())])
    snapshot = Snapshot.load(root)
    assert snapshot.parsed_stats is not None and len(snapshot.parsed_stats.read(["id"])) == 100
    assert snapshot.num_files == 120 - remove_after_checkpoint
    # f9-1, the checkpoint's 82nd add, removed: only the 81 before it still line up.
    assert snapshot.checkpoint_head == (81 if remove_after_checkpoint else 100)
    assert snapshot.advanced([]).checkpoint_head == snapshot.checkpoint_head
    typed = stats_table(snapshot)
    plain = StatsTable(snapshot.files, snapshot.schema, snapshot.partition_columns)
    typed.prepare(COLUMNS + ["p"])
    plain.prepare(COLUMNS + ["p"])
    assert np.array_equal(typed.num_records, plain.num_records, equal_nan=True)
    for name in COLUMNS + ["p"]:
        _same(typed.column(name), plain.column(name))
    for where in ("id > 500", "qty < -100", "price BETWEEN 1 AND 2", "ratio > 50", "amount > 900.5",
                  "name >= 'n00500'", "ts < TIMESTAMP'2024-01-05 00:00:00'", "day = DATE'2024-02-03'",
                  "p = 1 AND id < 0", "p IS NULL"):
        assert plan_scan(snapshot, where).report.files_selected == _plain_plan(snapshot, where), where


def _plain_plan(snapshot: Snapshot, where: str) -> int:
    import dataclasses
    plain = dataclasses.replace(snapshot, loaded=dataclasses.replace(snapshot.file_state, parsed_stats=None))
    return plan_scan(plain, where).report.files_selected


def test_the_property_turns_typed_stats_off(tmp_path):
    root = _table(str(tmp_path / "t"), {"delta.checkpoint.writeStatsAsStruct": "false"})
    cp = pq.read_table(os.path.join(root, LOG_DIR, checkpoint_name(10)))
    assert cp.schema.field("add").type.get_field_index("stats_parsed") < 0
    assert Snapshot.load(root).parsed_stats is None


def test_delta_rs_reads_a_checkpoint_with_typed_stats(tmp_path):
    deltalake = pytest.importorskip("deltalake")
    root = _table(str(tmp_path / "t"))
    for v in range(10):
        os.unlink(os.path.join(root, LOG_DIR, f"{v:020d}.json"))
    table = deltalake.DeltaTable(root)
    actions = pa.table(table.get_add_actions(flatten=True))
    assert table.version() == 12 and actions.num_rows == 120
    assert sorted(actions.column("path").to_pylist()) == sorted(f.path for f in Snapshot.load(root).add_files)
