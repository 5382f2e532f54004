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

The plan's report says how the log was replayed (ScanReport.replay). `t.count(where)` is
answered the same way: each task counts its share's rows from the stats where they are exact and
hands back the files they cannot answer, which are read. Anything else that needs every file (a
write's conflict check of a delete, a checkpoint, VACUUM, lake.sql) reads the checkpoint in the
driver on first use, as for any table.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterable
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa

from skiplake.expr.parse import bind
from skiplake.expr.tree import Node
from skiplake.log.actions import AddFile
from skiplake.log.arrow_schema import FILES_SCHEMA
from skiplake.log.checkpoint_read import GroupAdds, actions_to_arrow, read_add_groups
from skiplake.log.location import is_remote, join
from skiplake.log.s3 import bucket_options, set_bucket_options
from skiplake.log.snapshot import LOG_DIR, FileKey, Snapshot, add_files_from_arrow
from skiplake.log.storage_for import storage_at
from skiplake.skipping.log_aggregates import COUNT_ALL, Aggregate, aggregate_from_log
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

_TASK_SCHEMA = ("selected binary, files_total long, files_selected long, bytes_total long, bytes_selected long, "
                "rows_total long, rows_selected long, partitions_total string, partitions_selected string")


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
class _Job:
    """What each task needs: the table's head, the predicate, and the files the commits after
    the checkpoint touched (picklable: no storage objects or clients)."""
    table_path: str
    log_root: str
    bucket: str | None
    options: dict[str, str]
    snapshot_head: tuple
    where: str | Node | None
    touched: frozenset[FileKey]
    tasks: tuple[tuple[tuple[str, tuple[int, ...]], ...], ...]   # each task's files and their row groups
    answer: str = "plan"   # "plan": the files a scan keeps; "count": COUNT(*) from the stats

    def run(self, batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
        """Plan the row groups of the tasks whose numbers `batches` hold (`id`): a row per file."""
        if self.bucket is not None:
            set_bucket_options(self.bucket, self.options)
        storage = storage_at(self.log_root)
        version, protocol, metadata = self.snapshot_head
        for batch in batches:
            for task in batch.column("id").to_pylist():
                for name, groups in self.tasks[task]:
                    share = Snapshot.of_files(self.table_path, version, protocol, metadata,
                                              read_add_groups(storage, name, groups), storage, self.touched)
                    yield _task_row(plan_scan(share, self.where)) if self.answer == "plan" \
                        else _count_row(share, self.where)


def _task_row(plan: ScanPlan) -> pa.RecordBatch:
    # The kept files with their JSON stats (read back from just their row groups).
    kept = plan.snapshot.files_with_stats(plan.mask) if plan.snapshot is not None and plan.mask is not None \
        else plan.selected
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, kept.schema) as writer:
        writer.write_table(kept)
    r = plan.report
    total, selected = _partitions(plan)
    return pa.RecordBatch.from_pydict({
        "selected": [sink.getvalue().to_pybytes()],
        "files_total": [r.files_total], "files_selected": [r.files_selected],
        "bytes_total": [r.bytes_total], "bytes_selected": [r.bytes_selected],
        "rows_total": [-1 if r.rows_total is None else r.rows_total],
        "rows_selected": [-1 if r.rows_selected is None else r.rows_selected],
        "partitions_total": [json.dumps(total)], "partitions_selected": [json.dumps(selected)],
    })


def _count_row(share: Snapshot, where: str | Node | None) -> pa.RecordBatch:
    node = bind(where, share.schema) if isinstance(where, str) else where
    counted, unread = _count(share, node)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, unread.schema) as writer:
        writer.write_table(unread)
    return pa.RecordBatch.from_pydict({"unread": [sink.getvalue().to_pybytes()], "counted": [counted]})


def _count(share: Snapshot, node: Node | None) -> tuple[int, pa.Table]:
    """COUNT(*) of `where` over a share's files from their stats, and the files the stats cannot answer."""
    aggregation = aggregate_from_log(share, [Aggregate(COUNT_ALL)], [], node)
    return int(aggregation.groups.get((), [0])[0] or 0), share.files_with_stats(aggregation.scan)


def _partitions(plan: ScanPlan) -> tuple[list[tuple[str | None, ...]], list[tuple[str | None, ...]]]:
    """The distinct partitions of a share's files, and of those it selected (none unpartitioned):
    the job's totals are their unions."""
    if plan.snapshot is None or not plan.snapshot.partition_columns or plan.mask is None:
        return [], []
    stats = stats_table(plan.snapshot)
    keys = stats.partition_keys
    return keys, [keys[i] for i in np.unique(stats.partition_ids[plan.mask]).tolist()]


def count_files(spark: "SparkSession", snapshot: Snapshot, where: str | None = None) -> tuple[int, list[AddFile]]:
    """COUNT(*) of `where` over a snapshot whose files are pending, by a Spark job: the rows the
    stats answer exactly, and the files they cannot (to be read)."""
    out, local, _ = _run(spark, snapshot, where, "count", "unread binary, counted long")
    node = bind(where, snapshot.schema) if where is not None else None
    counted, unread = _count(local, node)
    shares = [unread] + [pa.ipc.open_stream(row["unread"]).read_all().cast(unread.schema) for row in out]
    return counted + sum(row["counted"] for row in out), add_files_from_arrow(pa.concat_tables(shares))


def _plan_by_job(spark: "SparkSession", snapshot: Snapshot, where: str | Node | None) -> ScanPlan:
    out, local, tasks = _run(spark, snapshot, where, "plan", _TASK_SCHEMA)
    assert snapshot.pending is not None
    return _merged(plan_scan(local, where), out, tasks, snapshot.pending.checkpoint_adds)


def _run(spark: "SparkSession", snapshot: Snapshot, where: str | Node | None, answer: str,
         schema: str) -> tuple[list, Snapshot, int]:
    """The tasks' rows of a job answering `answer` over the checkpoint's files, the snapshot of
    the commits' own files (the driver's share), and the number of tasks."""
    pending = snapshot.pending
    assert pending is not None
    root = join(snapshot.table_path, LOG_DIR)
    bucket = urlparse(root).netloc if is_remote(root) else None
    tasks = _tasks(pending.groups)
    job = _Job(snapshot.table_path, root, bucket, bucket_options(bucket) if bucket else {},
               (snapshot.version, snapshot.protocol, snapshot.metadata), where,
               frozenset(pending.added) | frozenset(pending.removed), tasks, answer)
    # One partition per task, numbered by spark.range: no shuffle before the tasks.
    out = spark.range(0, len(tasks), 1, len(tasks)).mapInArrow(job.run, schema).collect() if tasks else []
    # The commits' own adds, here: they are few (a commit's worth each).
    local = Snapshot.of_files(snapshot.table_path, snapshot.version, snapshot.protocol, snapshot.metadata,
                              GroupAdds(_added_rows(snapshot), None, False), snapshot.storage)
    return out, local, len(tasks)


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


def _merged(local: ScanPlan, out: list, tasks: int, adds: int) -> ScanPlan:
    """The driver's plan of the commits' files joined with the tasks' shares."""
    shares = [pa.ipc.open_stream(row["selected"]).read_all() for row in out]
    selected = pa.concat_tables([local.selected] + [t.cast(local.selected.schema) for t in shares])
    r = local.report

    def total(column: str, own: int | None) -> int | None:
        values = [row[column] for row in out]
        if own is None or any(v < 0 for v in values):
            return None
        return own + sum(values)

    own_total, own_selected = _partitions(local)

    def partitions(column: str, own: list) -> int:
        return len({tuple(k) for row in out for k in json.loads(row[column])} | {tuple(k) for k in own})

    report = replace(
        r, files_total=r.files_total + sum(row["files_total"] for row in out),
        files_selected=r.files_selected + sum(row["files_selected"] for row in out),
        bytes_total=r.bytes_total + sum(row["bytes_total"] for row in out),
        bytes_selected=r.bytes_selected + sum(row["bytes_selected"] for row in out),
        rows_total=total("rows_total", r.rows_total), rows_selected=total("rows_selected", r.rows_selected),
        partitions_total=partitions("partitions_total", own_total),
        partitions_selected=partitions("partitions_selected", own_selected),
        replay=f"a Spark job of {tasks} task{'s' if tasks != 1 else ''} over the checkpoint's {adds:,} adds")
    return ScanPlan(selected, report, local.predicate, local.buckets)
