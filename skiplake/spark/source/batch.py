"""Batch reads and writes through the `skiplake` data source.

A read plans its files on the driver as `t.scan` does (pushed filters prune partitions, stats and
buckets) and reads them in Python workers as Arrow batches (skiplake.log.arrow_reads). A write
makes data files in the workers (skiplake.txn.arrow_writes) and commits them in one commit on the
driver (skiplake.txn.file_commits)."""
from __future__ import annotations

import heapq
import os
from dataclasses import dataclass, replace
from typing import Any, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceReader,
    Filter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from skiplake.errors import InvalidArgumentError, NotATableError
from skiplake.expr.tree import Node
from skiplake.log.actions import AddFile, Metadata
from skiplake.log.arrow_reads import read_file
from skiplake.log.changes import versions_between
from skiplake.log.column_mapping import mapping_mode
from skiplake.log.location import bucket_and_key, is_remote, resolve
from skiplake.log.s3 import OPTION_KEYS, set_bucket_options
from skiplake.log.schema import Schema
from skiplake.log.snapshot import Snapshot, add_files_from_arrow, list_log, log_storage
from skiplake.log.storage_for import has_log
from skiplake.skipping.plan import plan_scan
from skiplake.spark.reads.log_job import DEFAULT_MIN_FILES, Shares, commits_share
from skiplake.spark.session.setting_values import conf_count
from skiplake.spark.session.spark_types import from_spark
from skiplake.spark.source.pushed_filters import predicate
from skiplake.txn.arrow_writes import FileWritePlan, TaskFiles, discard, write_task
from skiplake.txn.file_commits import AppTransaction, FileCommit, commit_files
from skiplake.txn.file_compaction import MIN_FILES

# Bytes of data files one read task takes at most (Spark's spark.sql.files.maxPartitionBytes
# default), and what each file counts for at least (spark.sql.files.openCostInBytes).
TASK_BYTES = 128 << 20
OPEN_COST = 4 << 20
REPLAY_OPTION = "replayJobMinFiles"


def option(options: Mapping[str, str], name: str) -> str | None:
    """An option by its name, case-insensitively (Spark passes them lower-cased or as given)."""
    lowered = name.lower()
    return next((v for k, v in options.items() if k.lower() == lowered), None)


def table_path(options: Mapping[str, str]) -> str:
    """The table location of `load(path)` / `save(path)`; an InvalidArgumentError without one. On an
    object store, options named as a Lake's storage_options (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...)
    reach the bucket: Python workers do not see the options a Lake set in the driver's process."""
    path = option(options, "path")
    if not path:
        # Spark 4.1 hands a Python data source no LOCATION of a catalog table (CREATE TABLE ... USING).
        raise InvalidArgumentError(
            "the skiplake data source needs the table's path: load(path), save(path), or for SQL "
            "CREATE TEMPORARY VIEW name USING skiplake OPTIONS (path '...')")
    location = resolve(path)
    storage = storage_options(options)
    if storage and is_remote(location):
        set_bucket_options(bucket_and_key(location)[0], storage)
    return location


def storage_options(options: Mapping[str, str]) -> dict[str, str]:
    """The options that are a Lake's storage_options (endpoint, credentials, region)."""
    return {k: v for k, v in options.items() if k.upper() in OPTION_KEYS or k.upper() == "AWS_DEFAULT_REGION"}


def replay_bound(options: Mapping[str, str]) -> int:
    """The option replayJobMinFiles: from how many adds in its checkpoint a table read through
    the data source leaves its file list to the read tasks (as the session setting
    spark.skiplake.log.replayJobMinFiles does for the table API; a data source's planning runs in
    a Python worker, which sees options but not the session's settings)."""
    return conf_count(REPLAY_OPTION, option(options, REPLAY_OPTION), DEFAULT_MIN_FILES)


def read_snapshot(options: Mapping[str, str], files_later_from: int | None = None) -> Snapshot:
    """The snapshot a batch read reads: the latest, or the one `versionAsOf` / `timestampAsOf`
    names; its files left pending when its checkpoint holds at least `files_later_from` adds."""
    path = table_path(options)
    if not has_log(path):
        raise NotATableError(path)
    version = option(options, "versionAsOf")
    timestamp = option(options, "timestampAsOf")
    if version is not None and timestamp is not None:
        raise InvalidArgumentError("give versionAsOf or timestampAsOf, not both")
    if timestamp is not None:
        _, at = versions_between(path, None, timestamp, list_log(log_storage(path)))
        return Snapshot.load(path, at, files_later_from=files_later_from)
    return Snapshot.load(path, int(version) if version is not None else None, files_later_from=files_later_from)


class FileGroup(InputPartition):
    """The files one read task reads."""

    def __init__(self, files: list[AddFile]) -> None:
        """A group of `files`."""
        super().__init__(files)
        self.files = files


class ShareGroup(InputPartition):
    """One task's share of a checkpoint too large to replay in the planning process: the task
    plans it (the same planner, over just those files) and reads the files it keeps."""

    def __init__(self, shares: Shares, task: int, predicate: Node | None) -> None:
        """Task `task` of `shares`, planned by `predicate`."""
        super().__init__(task)
        self.shares = shares
        self.task = task
        self.predicate = predicate

    def files(self) -> list[AddFile]:
        """The files of the share the predicate keeps."""
        return [f for share in self.shares.snapshots(self.task)
                for f in add_files_from_arrow(plan_scan(share, self.predicate, describe=False).selected)]


def file_groups(files: Sequence[Any], size_of: Any = lambda f: f.size, slots: int | None = None) -> list[list[Any]]:
    """Files (or stream units) in balanced groups, one per read task, as Spark splits a file scan:
    a group's size aims at total / slots (Spark's maxSplitBytes: at most TASK_BYTES, at least
    OPEN_COST), and the files go largest first to the least loaded group. `slots` defaults to
    this machine's cores: a Python data source learns nothing of the cluster. Each group keeps
    the files' order; at least one group."""
    if not files:
        return [[]]
    sizes = [max(int(size_of(f)), OPEN_COST) for f in files]   # Spark counts an open cost per file
    total = sum(sizes)
    target = min(TASK_BYTES, max(OPEN_COST, total // max(1, slots or os.cpu_count() or 2)))
    count = max(1, min(len(files), -(-total // target)))
    group_of, largest = _packed(sizes, count)
    while largest > TASK_BYTES and count < len(files):   # whole files can overfill a group: add more
        count = min(len(files), max(count + 1, -(-count * largest // TASK_BYTES)))
        group_of, largest = _packed(sizes, count)
    groups: list[list[Any]] = [[] for _ in range(count)]
    for i, f in enumerate(files):
        groups[group_of[i]].append(f)
    return [g for g in groups if g]


def _packed(sizes: Sequence[int], count: int) -> tuple[list[int], int]:
    """Each size's group among `count`, largest first to the least loaded; and the largest load
    of a group holding more than one file."""
    loads = [(0, g) for g in range(count)]
    group_of = [0] * len(sizes)
    members = [0] * count
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        load, g = heapq.heappop(loads)
        group_of[i] = g
        members[g] += 1
        heapq.heappush(loads, (load + sizes[i], g))
    return group_of, max((load for load, g in loads if members[g] > 1), default=0)


@dataclass(frozen=True)
class TableLayout:
    """What a task needs to read a table's files: picklable."""
    path: str
    schema: Schema
    partition_columns: list[str]
    mode: str
    storage: tuple[tuple[str, str], ...] = ()   # the storage options a task's process must use

    @staticmethod
    def of(snapshot: Snapshot, options: Mapping[str, str]) -> "TableLayout":
        """The layout of `snapshot`, read with the storage options among `options`."""
        return TableLayout(snapshot.table_path, snapshot.schema, snapshot.partition_columns, snapshot.column_mapping,
                           tuple(storage_options(options).items()))

    def reach(self) -> None:
        """Let this process reach the table's storage (in a task, which has not seen the options)."""
        table_path({"path": self.path, **dict(self.storage)})


class BatchReader(DataSourceReader):
    """A batch read of one snapshot."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        """The reader of the snapshot `options` name, giving rows of `schema`."""
        snapshot = read_snapshot(options, files_later_from=0)   # its files are the partitions' concern
        self.version = snapshot.version
        self.replay_bound = replay_bound(options)
        self.layout = TableLayout.of(snapshot, options)
        self.arrow_schema = to_arrow_schema(schema)
        self.predicate: Node | None = None

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Plan with the filters; all of them stay Spark's to apply to the rows (pruning skips files, not rows)."""
        self.predicate = predicate(filters, self.layout.schema)
        return filters

    def partitions(self) -> Sequence[InputPartition]:
        """The planned files in tasks of about TASK_BYTES. Of a table whose checkpoint holds at
        least replayJobMinFiles adds, the checkpoint's files are not read here: each of its
        shares (as a Spark job would plan them: skiplake.spark.reads.log_job) is a task that plans
        and reads its own files; the commits' files are planned here."""
        snapshot = Snapshot.load(self.layout.path, self.version, files_later_from=self.replay_bound)
        if not snapshot.files_pending:
            return [FileGroup(g) for g in file_groups(plan_scan(snapshot, self.predicate).files)]
        shares = Shares.of(snapshot)
        kept = plan_scan(commits_share(snapshot), self.predicate).files
        planned: list[InputPartition] = [ShareGroup(shares, task, self.predicate) for task in range(len(shares.tasks))]
        planned += [FileGroup(g) for g in file_groups(kept) if g]
        return planned or [FileGroup([])]   # a read has at least one task, as file_groups gives

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The rows of the task's files."""
        if isinstance(partition, ShareGroup):
            self.layout.reach()   # before the share's checkpoint is read: an object store's options
            files = partition.files()
        else:
            assert isinstance(partition, FileGroup)
            files = partition.files
        yield from read_batches(self.layout, files, self.arrow_schema)


def read_batches(layout: TableLayout, files: Sequence[AddFile], arrow_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The rows of `files` as batches of `arrow_schema`, whose leading columns are the table's."""
    layout.reach()
    table_schema = pa.schema(list(arrow_schema)[:len(layout.schema.fields)])
    for f in files:
        yield from read_file(layout.path, f, layout.schema, layout.partition_columns, layout.mode, table_schema)


class Written(WriterCommitMessage):
    """The files one write task made, and the table version it planned them on."""

    def __init__(self, files: TaskFiles, read_version: int | None) -> None:
        """The message of a task that wrote `files` planning on `read_version` (None: a new table)."""
        self.adds = files.adds
        self.marks = files.marks
        self.read_version = read_version


def session_time_zone() -> str:
    """Spark's session time zone, in a write task: Spark hands each task the session's settings
    as local properties (one set explicitly); otherwise the zone the machine's clock runs in, as
    the JVM's default would be."""
    context = TaskContext.get()
    zone = context.getLocalProperty("spark.sql.session.timeZone") if context is not None else None
    return zone or local_zone()


def local_zone() -> str:
    """The name of this machine's time zone (TZ, else /etc/localtime), UTC when unknown."""
    zone = os.environ.get("TZ", "").lstrip(":")
    if zone:
        return zone
    try:
        target = os.path.realpath("/etc/localtime")
    except OSError:
        return "UTC"
    return target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else "UTC"


def task_files(target: "WriteTarget", batches: Iterator[pa.RecordBatch]) -> Written:
    """Write one task's rows as data files of `target`."""
    context = TaskContext.get()
    task = context.partitionId() if context is not None else 0
    return Written(write_task(target.plan, batches, task, session_time_zone()), target.read_version)


@dataclass(frozen=True)
class WriteTarget:
    """Where a write through the data source goes, worked out once on the driver."""
    plan: FileWritePlan
    read_version: int | None
    new_schema: Schema | None
    partition_by: tuple[str, ...]

    @staticmethod
    def of(options: Mapping[str, str], schema: StructType) -> "WriteTarget":
        """The target of a write of rows of `schema` to the path in `options`: the table there, or
        a new one. A table with a writer feature this path cannot apply is refused."""
        path = table_path(options)
        if not has_log(path):
            # As delta-spark: a table made by a DataFrame write takes NULL in every column.
            given = Schema(tuple(replace(f, nullable=True) for f in from_spark(schema).fields))
            parts = tuple(p.strip() for p in (option(options, "partitionBy") or "").split(",") if p.strip())
            metadata = Metadata.new(given, list(parts), {})
            return WriteTarget(FileWritePlan.of(path, metadata, "none"), None, given, parts)
        snapshot = Snapshot.load(path)
        mode = mapping_mode(snapshot.configuration, snapshot.protocol)
        return WriteTarget(FileWritePlan.of(path, snapshot.metadata, mode, schema.fieldNames()), snapshot.version,
                           None, tuple(snapshot.partition_columns))

    def commit(self, messages: Sequence[WriterCommitMessage | None], overwrite: bool, app: AppTransaction | None,
               options: Mapping[str, str], operation: str = "WRITE") -> int | None:
        """Commit the files the tasks made; None when `app` was already committed. The option
        autoCompactMinNumFiles changes auto compaction's minNumFiles (50)."""
        written = [m for m in messages if isinstance(m, Written)]
        adds = tuple(a for m in written for a in m.adds)
        marks: dict[str, list[int]] = {}
        for m in written:
            for name, value in m.marks.items():
                marks.setdefault(name, []).append(value)
        # The oldest version a task planned on: what a concurrent commit is checked against.
        planned = [m.read_version for m in written if m.read_version is not None]
        read_version = min(planned) if planned else self.read_version
        min_files = option(options, "autoCompactMinNumFiles")
        return commit_files(FileCommit(self.plan.table_path, adds, overwrite, app, read_version,
                                       self.new_schema, self.partition_by, operation,
                                       compact_min_files=int(min_files) if min_files else MIN_FILES,
                                       identity_values=tuple((n, tuple(v)) for n, v in marks.items())))

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Delete the files the tasks made."""
        discard(self.plan.table_path, [a for m in messages if isinstance(m, Written) for a in m.adds])


class BatchWriter(DataSourceArrowWriter):
    """`df.write.format("skiplake").mode("append" | "overwrite").save(path)`."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        """The writer of rows of `schema`; `txnAppId`/`txnVersion` make it idempotent."""
        self.options = dict(options)
        self.target = WriteTarget.of(options, schema)
        self.overwrite = overwrite
        self.app = AppTransaction.of(option(options, "txnAppId"), option(options, "txnVersion"))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        """Write one task's rows as data files."""
        table_path(self.options)   # this task's process reaches the storage with the options
        return task_files(self.target, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Commit every task's files in one commit."""
        table_path(self.options)
        self.target.commit(messages, self.overwrite, self.app, self.options)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Delete the files of a failed write."""
        table_path(self.options)
        self.target.abort(messages)
