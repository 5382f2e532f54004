"""The conflict matrix of isolation-levels-write-conflicts.de.txt, table-driven, at the log level.

Each operation is modelled exactly as skiplake's Spark operations build their transactions:
a scan of `where` (recording the predicate and every candidate file as read), removes of the
files it rewrites, adds of the rewritten files; INSERT is a blind append; OPTIMIZE removes and
adds with dataChange=false. The loser starts from the same snapshot as the winner and commits
second. tests/test_concurrency.py runs a sample of the same matrix through real Spark operations.
"""
from __future__ import annotations

import itertools
import json

import pytest

from skiplake.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentModificationError,
)
from skiplake.log.actions import AddFile, Metadata
from skiplake.log.schema import Field, Schema
from skiplake.log.snapshot import Snapshot, list_log, log_storage
from skiplake.skipping.plan import plan_scan
from skiplake.txn import ReadSet, commit, create

SCHEMA = Schema((Field("id", "long"), Field("p", "integer"), Field("v", "long")))
WS, SER = "WriteSerializable", "Serializable"

# Where each side acts, per layout: (loser's where, winner's where, partition of an insert's file, v range of it)
LAYOUTS = {
    "partitioned, disjoint partitions": ("p = 1", "p = 2", {"loser": 1, "winner": 2}),
    "partitioned, same partition": ("p = 1", "p = 1 AND v >= 0", {"loser": 1, "winner": 1}),
    "unpartitioned, overlapping ranges": ("v < 150", "v >= 50", None),
    "unpartitioned, disjoint ranges (stats)": ("v < 100", "v >= 100", None),
}
OVERLAPPING = {"partitioned, same partition", "unpartitioned, overlapping ranges"}
OPS = ["INSERT", "INSERT reading the table", "DELETE/UPDATE/MERGE", "OPTIMIZE"]


def file(path: str, p: int | None, lo: int, hi: int, data_change: bool = True) -> AddFile:
    stats = json.dumps({"numRecords": 10, "minValues": {"id": lo, "v": lo}, "maxValues": {"id": hi, "v": hi},
                        "nullCount": {"id": 0, "v": 0}})
    pv = {"p": str(p)} if p is not None else {}
    return AddFile(path, pv, 1000, 1, data_change, stats)


def make_table(tmp_path, partitioned: bool, isolation: str) -> Snapshot:
    path = str(tmp_path / "t")
    config = {"delta.isolationLevel": "Serializable"} if isolation == SER else {}
    snap = create(path, Metadata.new(SCHEMA, ["p"] if partitioned else [], config))
    if partitioned:
        files = [file(f"p={p}/f{p}{i}.parquet", p, i * 100, i * 100 + 99) for p in (1, 2) for i in (0, 1)]
    else:
        files = [file(f"f{i}.parquet", None, i * 100, i * 100 + 99) for i in range(3)]
    commit(snap, files, "WRITE")
    return Snapshot.load(path)


def build(op: str, side: str, snap: Snapshot, layout: str) -> tuple[str, ReadSet, list]:
    """(operation, read set, actions) of one side's transaction, as skiplake's operations make them."""
    loser_where, winner_where, parts = LAYOUTS[layout]
    where = loser_where if side == "loser" else winner_where
    partition = parts[side] if parts else None
    if op.startswith("INSERT"):
        lo = 0 if side == "loser" or layout != "unpartitioned, disjoint ranges (stats)" else 150
        lo = 60 if layout == "unpartitioned, overlapping ranges" else lo
        new = file(f"{side}-insert.parquet" if partition is None else f"p={partition}/{side}-insert.parquet",
                   partition, lo, lo + 10)
        read = ReadSet(whole_table=True) if op == "INSERT reading the table" else ReadSet()
        return "WRITE", read, [new]
    plan = plan_scan(snap, where)
    read = ReadSet(predicates=[plan.predicate], files={f.path for f in plan.files})
    if op == "OPTIMIZE":
        merged = file(f"{side}-compacted.parquet", partition, 0, 0, data_change=False)
        merged = AddFile(merged.path, plan.files[0].partitionValues, 2000, 1, False, plan.files[0].stats)
        return "OPTIMIZE", read, [f.remove(1, data_change=False) for f in plan.files] + [merged]
    rewritten = [AddFile(f"{side}-{f.path.replace('/', '-')}", f.partitionValues, f.size, 1, True, f.stats)
                 for f in plan.files]
    return "DELETE", read, [f.remove(1) for f in plan.files] + rewritten


def expected(loser: str, winner: str, layout: str, isolation: str) -> type[Exception] | None:
    """The matrix of the seed ("without row-level concurrency"), with skiplake's stats narrowing."""
    if loser == "INSERT":
        return None                      # a blind append never conflicts
    # An INSERT whose query reads the target table read all of it: it behaves like MERGE over
    # the whole table, whatever the layout.
    if layout not in OVERLAPPING and loser != "INSERT reading the table":
        return None                      # disjoint partitions or disjoint data ranges
    reads_data = loser != "OPTIMIZE"     # OPTIMIZE changes no data: checked at snapshot isolation
    if winner == "INSERT":
        return ConcurrentAppendException if reads_data and isolation == SER else None
    if winner == "INSERT reading the table":
        return ConcurrentAppendException if reads_data else None
    if winner == "DELETE/UPDATE/MERGE":
        return ConcurrentAppendException if reads_data else ConcurrentDeleteReadException
    return ConcurrentDeleteReadException  # the winner compacted files the loser read


CASES = [(loser, winner, layout, iso) for loser, winner, layout, iso in
         itertools.product(OPS, OPS, LAYOUTS, (WS, SER))]


@pytest.mark.parametrize("loser,winner,layout,isolation", CASES,
                         ids=[f"{lo} after {w} | {lay} | {iso}" for lo, w, lay, iso in CASES])
def test_conflict_matrix(tmp_path, loser, winner, layout, isolation):
    base = make_table(tmp_path, layout.startswith("partitioned"), isolation)
    w_op, w_read, w_actions = build(winner, "winner", base, layout)
    l_op, l_read, l_actions = build(loser, "loser", base, layout)
    won = commit(base, w_actions, w_op, read_set=w_read)
    want = expected(loser, winner, layout, isolation)
    if want is None:
        result = commit(base, l_actions, l_op, read_set=l_read)
        assert result.version == won.version + 1 and result.attempts == 2
    else:
        with pytest.raises(want) as err:
            commit(base, l_actions, l_op, read_set=l_read)
        assert err.value.winning_version == won.version
        assert f"committed version {won.version}" in str(err.value)
        assert len(list_log(log_storage(base.table_path)).commits) == won.version + 1  # nothing written


def test_delete_delete_when_files_are_removed_without_being_read(tmp_path):
    base = make_table(tmp_path, False, WS)
    victim = base.add_files[0]
    commit(base, [victim.remove(1)], "DELETE", read_set=ReadSet(predicates=[]))
    with pytest.raises(ConcurrentDeleteDeleteException, match=victim.path):
        commit(base, [victim.remove(1)], "DELETE", read_set=ReadSet(predicates=[plan_scan(base, "v > 1000").predicate]))


def test_messages_name_winner_partition_and_remedy(tmp_path):
    base = make_table(tmp_path, True, SER)
    commit(base, [file("p=1/new.parquet", 1, 0, 5)], "WRITE")
    plan = plan_scan(base, "p = 1")
    with pytest.raises(ConcurrentModificationError) as err:
        commit(base, [f.remove(1) for f in plan.files], "DELETE",
               read_set=ReadSet(predicates=[plan.predicate], files={f.path for f in plan.files}))
    text = str(err.value)
    assert "WRITE committed version 2" in text and "p=1" in text and "disjoint partitions" in text
    assert err.value.winning_operation == "WRITE"


def test_same_app_id_in_two_concurrent_transactions(tmp_path):
    from skiplake.errors import ConcurrentTransactionException
    from skiplake.log.actions import Txn
    base = make_table(tmp_path, False, WS)
    commit(base, [file("a.parquet", None, 0, 1), Txn("nightly-load", 7)], "WRITE")
    with pytest.raises(ConcurrentTransactionException, match="nightly-load"):
        commit(base, [file("b.parquet", None, 0, 1), Txn("nightly-load", 7)], "WRITE")
    # Another app id is a blind append that simply retries.
    assert commit(base, [file("c.parquet", None, 0, 1), Txn("other", 1)], "WRITE").attempts == 2
