"""Scan planning as a Spark job, over a checkpoint too large for one driver.

A table opened through skiplake's session API whose checkpoint holds at least
`spark.skiplake.log.replayJobMinFiles` adds (default 10,000,000) is loaded without them: its
snapshot's files are pending (Snapshot.load's `files_later_from`). A scan of it is then planned
by a Spark job, as delta-spark reconstructs its state: the checkpoint's row groups of adds are
spread over tasks; each reads its groups (ranged reads; with typed stats, not the JSON ones),
drops the files the commits after the checkpoint removed or replaced, and plans its share with
the same planner (partitions, stats, buckets), returning only the files it keeps (their JSON
stats read back from their row groups) and its counts. The commits' own adds are planned in
the driver. The driver never holds the table's file list: only the files the scan reads.

The plan's report says how the log was replayed (ScanReport.replay). Aggregates from the log
(`t.count(where)`, lake.sql's COUNT, MIN and MAX) are answered the same way: each task
aggregates its share from the stats where they are exact and hands back the files they cannot
answer, which are read. lake.sql plans a reference of such a table by the job first, then
prunes further (dynamic file pruning) over the files it kept (Snapshot.with_files). Anything
else that needs every file (a write's conflict check of a delete, a checkpoint, VACUUM) reads the
checkpoint in the driver on first use, as for any table.
"""
from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa

from skiplake.expr.parse import bind
from skiplake.expr.tree import Node
from skiplake.log.arrow_schema import FILES_SCHEMA
from skiplake.log.checkpoint_read import GroupAdds, actions_to_arrow, read_add_groups
from skiplake.log.location import is_remote, join
from skiplake.log.s3 import bucket_options, set_bucket_options
from skiplake.log.snapshot import LOG_DIR, FileKey, Snapshot
from skiplake.log.storage_for import storage_at
from skiplake.skipping.log_aggregates import Aggregate, LogAggregation, aggregate_from_log, merge
from skiplake.skipping.plan import ScanPlan, plan_scan, stats_table
from skiplake.spark.session.setting_values import conf_count

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MIN_FILES_CONF = "spark.skiplake.log.replayJobMinFiles"
# At 10M files a driver replay takes 3.6 GiB (typed checkpoint stats) to 6.7 GiB (JSON only):
# past that, a table's file list is better left to the executors.
DEFAULT_MIN_FILES = 10_000_000
# Checkpoint adds per task, about: a task reads whole row groups (a million adds each in
# skiplake's checkpoints, 100,000 in some other writers').
ADDS_PER_TASK = 250_000

_PLAN_SCHEMA = ("selected binary, files_total long, files_selected long, bytes_total long, bytes_selected long, "
                "rows_total long, rows_selected long, partitions_total string, partitions_selected string")
_AGGREGATE_SCHEMA = ("unread binary, groups binary, from_stats long, excluded long, files_total long, "
                     "bytes_total long, partitions_total string")


def min_files(spark: "SparkSession") -> int:
    """The size from which a checkpoint's files are left to a Spark job (MIN_FILES_CONF)."""
    return conf_count(MIN_FILES_CONF, spark.conf.get(MIN_FILES_CONF, None), DEFAULT_MIN_FILES)


def load_snapshot(spark: "SparkSession", path: str, version: int | None = None) -> Snapshot:
    """The table at `path` (and `version`), its files left pending when its checkpoint is at
    least min_files(spark) adds."""
    return Snapshot.load(path, version, files_later_from=min_files(spark))


def plan_files(spark: "SparkSession", snapshot: Snapshot, where: str | Node | None = None) -> ScanPlan:
    """The scan plan of `where` over `snapshot`: plan_scan in the driver, or a Spark job when
    the snapshot's files are pending."""
    if not snapshot.files_pending:
        return plan_scan(snapshot, where)
    return _plan_by_job(spark, snapshot, where)


@dataclass(frozen=True)
class _Question:
    """What the tasks answer over their shares: "plan", the files a scan of `where` keeps; or
    "aggregate", `aggregates` grouped by `group_by` from the stats of the files they answer."""
    where: str | Node | None
    answer: str = "plan"
    aggregates: tuple[Aggregate, ...] = ()
    group_by: tuple[str, ...] = ()

    def of(self, share: Snapshot) -> pa.RecordBatch:
        """A task's row for its `share` of the files."""
        if self.answer == "plan":
            return _plan_row(plan_scan(share, self.where))
        node = bind(self.where, share.schema) if isinstance(self.where, str) else self.where
        return _aggregate_row(share, aggregate_from_log(share, self.aggregates, self.group_by, node))


@dataclass(frozen=True)
class Shares:
    """A pending snapshot's checkpoint adds dealt into tasks, with what a task needs to load its
    share of the files (picklable: no storage objects or clients). A Spark job plans a scan by
    them (below); a read through the data source reads its shares' kept files in the same tasks."""
    table_path: str
    log_root: str
    bucket: str | None
    options: dict[str, str]
    head: tuple                      # the snapshot's version, protocol and metadata
    touched: frozenset[FileKey]      # the files the commits after the checkpoint added or removed
    tasks: tuple[tuple[tuple[str, tuple[int, ...]], ...], ...]   # each task's files and their row groups

    @staticmethod
    def of(snapshot: Snapshot) -> "Shares":
        """The shares of `snapshot`, whose files are pending, in tasks of about ADDS_PER_TASK adds."""
        pending = snapshot.pending
        assert pending is not None
        root = join(snapshot.table_path, LOG_DIR)
        bucket = urlparse(root).netloc if is_remote(root) else None
        return Shares(snapshot.table_path, root, bucket, bucket_options(bucket) if bucket else {},
                      (snapshot.version, snapshot.protocol, snapshot.metadata),
                      frozenset(pending.added) | frozenset(pending.removed), _tasks(pending.groups))

    def snapshots(self, task: int) -> Iterator[Snapshot]:
        """Task `task`'s shares, a snapshot of the files of each of its checkpoint files."""
        if self.bucket is not None:
            set_bucket_options(self.bucket, self.options)
        storage = storage_at(self.log_root)
        version, protocol, metadata = self.head
        for name, groups in self.tasks[task]:
            yield Snapshot.of_files(self.table_path, version, protocol, metadata, read_add_groups(storage, name, groups),
                                    storage, self.touched)


def commits_share(snapshot: Snapshot) -> Snapshot:
    """The files the commits after the checkpoint of a pending snapshot added, as a snapshot of
    their own: the driver's share (a commit's worth each)."""
    return Snapshot.of_files(snapshot.table_path, snapshot.version, snapshot.protocol, snapshot.metadata,
                             GroupAdds(_added_rows(snapshot), None, False), snapshot.storage)


@dataclass(frozen=True)
class _Job:
    """A question over the shares, for the tasks of a Spark job."""
    shares: Shares
    question: _Question

    def run(self, batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
        """Answer for the row groups of the tasks whose numbers `batches` hold (`id`): a row per file."""
        for batch in batches:
            for task in batch.column("id").to_pylist():
                for share in self.shares.snapshots(task):
                    yield self.question.of(share)


def _plan_row(plan: ScanPlan) -> pa.RecordBatch:
    # The kept files with their JSON stats (read back from just their row groups).
    kept = plan.snapshot.files_with_stats(plan.mask) if plan.snapshot is not None and plan.mask is not None \
        else plan.selected
    r = plan.report
    total, selected = _partitions(plan)
    return pa.RecordBatch.from_pydict({
        "selected": [_ipc(kept)],
        "files_total": [r.files_total], "files_selected": [r.files_selected],
        "bytes_total": [r.bytes_total], "bytes_selected": [r.bytes_selected],
        "rows_total": [-1 if r.rows_total is None else r.rows_total],
        "rows_selected": [-1 if r.rows_selected is None else r.rows_selected],
        "partitions_total": [json.dumps(total)], "partitions_selected": [json.dumps(selected)],
    })


def _aggregate_row(share: Snapshot, aggregation: LogAggregation) -> pa.RecordBatch:
    # The groups' partial values are typed (dates, decimals): pickled, as the job's own data.
    return pa.RecordBatch.from_pydict({
        "unread": [_ipc(share.files_with_stats(aggregation.scan))],
        "groups": [pickle.dumps(aggregation.groups)],
        "from_stats": [aggregation.from_stats], "excluded": [aggregation.excluded],
        "files_total": [share.num_files], "bytes_total": [share.size_bytes],
        "partitions_total": [json.dumps(_partition_keys(share))],
    })


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _shares(out: list, column: str, schema: pa.Schema) -> list[pa.Table]:
    return [pa.ipc.open_stream(row[column]).read_all().cast(schema) for row in out]


def _partition_keys(snapshot: Snapshot, mask: np.ndarray | None = None) -> list[tuple[str | None, ...]]:
    """The distinct partitions of a share's files (of those `mask` selects), none unpartitioned:
    the job's totals are their unions."""
    if not snapshot.partition_columns or not snapshot.num_files:
        return []
    stats = stats_table(snapshot)
    keys = stats.partition_keys
    return keys if mask is None else [keys[i] for i in np.unique(stats.partition_ids[mask]).tolist()]


def _partitions(plan: ScanPlan) -> tuple[list[tuple[str | None, ...]], list[tuple[str | None, ...]]]:
    """The distinct partitions of a share's files, and of those it selected."""
    if plan.snapshot is None or plan.mask is None:
        return [], []
    return _partition_keys(plan.snapshot), _partition_keys(plan.snapshot, plan.mask)


def _distinct(out: list, column: str, own: list) -> int:
    return len({tuple(k) for row in out for k in json.loads(row[column])} | {tuple(k) for k in own})


@dataclass(frozen=True)
class JobAggregation:
    """Aggregates of a snapshot whose files are pending, from the stats by a Spark job: the
    groups' values of the files they answer, and the table left with only the files they cannot
    (to be read; `aggregation.scan` selects all of them), with the whole table's totals."""
    aggregation: LogAggregation
    unread: Snapshot
    files_total: int
    bytes_total: int
    partitions_total: int
    replay: str


def aggregate_files(spark: "SparkSession", snapshot: Snapshot, aggregates: Sequence[Aggregate],
                    group_by: Sequence[str], where: Node | None) -> JobAggregation:
    """`aggregates` grouped by the partition columns `group_by` over the rows `where` keeps, of
    a snapshot whose files are pending: each task aggregates its share from the stats
    (aggregate_from_log) and returns the files they cannot answer; the driver merges."""
    question = _Question(where, "aggregate", tuple(aggregates), tuple(group_by))
    out, local, tasks = _run(spark, snapshot, question, _AGGREGATE_SCHEMA)
    own = aggregate_from_log(local, aggregates, group_by, where)
    groups = {key: list(values) for key, values in own.groups.items()}
    for row in out:
        for key, values in pickle.loads(row["groups"]).items():
            merge(aggregates, groups, key, values)
    kept = local.files_with_stats(own.scan)
    unread = pa.concat_tables([kept] + _shares(out, "unread", kept.schema))
    aggregation = LogAggregation(groups, own.from_stats + sum(row["from_stats"] for row in out),
                                 own.excluded + sum(row["excluded"] for row in out),
                                 np.ones(unread.num_rows, dtype=bool))
    return JobAggregation(aggregation, snapshot.with_files(unread),
                          local.num_files + sum(row["files_total"] for row in out),
                          local.size_bytes + sum(row["bytes_total"] for row in out),
                          _distinct(out, "partitions_total", _partition_keys(local)),
                          _replay(tasks, snapshot))


def _plan_by_job(spark: "SparkSession", snapshot: Snapshot, where: str | Node | None) -> ScanPlan:
    out, local, tasks = _run(spark, snapshot, _Question(where), _PLAN_SCHEMA)
    return _merged(plan_scan(local, where), out, _replay(tasks, snapshot))


def _run(spark: "SparkSession", snapshot: Snapshot, question: _Question, schema: str) -> tuple[list, Snapshot, int]:
    """The tasks' rows of a job answering `question` over the checkpoint's files, the snapshot of
    the commits' own files (the driver's share), and the number of tasks."""
    shares = Shares.of(snapshot)
    tasks = len(shares.tasks)
    # One partition per task, numbered by spark.range: no shuffle before the tasks.
    job = _Job(shares, question)
    out = spark.range(0, tasks, 1, tasks).mapInArrow(job.run, schema).collect() if tasks else []
    local = commits_share(snapshot)
    return out, local, tasks


def _tasks(groups: tuple[tuple[str, int, int], ...]) -> tuple[tuple[tuple[str, tuple[int, ...]], ...], ...]:
    """The row groups of adds dealt, in order, into tasks of about ADDS_PER_TASK adds (a group
    never split): each task's files, with its row groups of each."""
    tasks: list[dict[str, list[int]]] = []
    size = 0
    for name, group, count in groups:
        if not tasks or (size and size + count > ADDS_PER_TASK):
            tasks.append({})
            size = 0
        tasks[-1].setdefault(name, []).append(group)
        size += count
    return tuple(tuple((name, tuple(held)) for name, held in task.items()) for task in tasks)


def _added_rows(snapshot: Snapshot) -> pa.Table:
    assert snapshot.pending is not None
    return actions_to_arrow(snapshot.pending.added.values(), FILES_SCHEMA)


def _replay(tasks: int, snapshot: Snapshot) -> str:
    assert snapshot.pending is not None
    return (f"a Spark job of {tasks} task{'s' if tasks != 1 else ''} over the checkpoint's "
            f"{snapshot.pending.checkpoint_adds:,} adds")


def _merged(local: ScanPlan, out: list, replay: str) -> ScanPlan:
    """The driver's plan of the commits' files joined with the tasks' shares."""
    selected = pa.concat_tables([local.selected] + _shares(out, "selected", local.selected.schema))
    r = local.report

    def total(column: str, own: int | None) -> int | None:
        values = [row[column] for row in out]
        if own is None or any(v < 0 for v in values):
            return None
        return own + sum(values)

    own_total, own_selected = _partitions(local)
    report = replace(
        r, files_total=r.files_total + sum(row["files_total"] for row in out),
        files_selected=r.files_selected + sum(row["files_selected"] for row in out),
        bytes_total=r.bytes_total + sum(row["bytes_total"] for row in out),
        bytes_selected=r.bytes_selected + sum(row["bytes_selected"] for row in out),
        rows_total=total("rows_total", r.rows_total), rows_selected=total("rows_selected", r.rows_selected),
        partitions_total=_distinct(out, "partitions_total", own_total),
        partitions_selected=_distinct(out, "partitions_selected", own_selected), replay=replay)
    return ScanPlan(selected, report, local.predicate, local.buckets)
