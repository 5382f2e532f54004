"""Structured Streaming through the `skiplake` data source: a source with Delta's semantics
(skiplake.log.stream_reads) and an exactly-once sink.

The source keeps its planner in the long-lived Python worker Spark runs it in. PySpark 4.1 passes
`latestOffset` neither the batch's start nor a read limit, so the source follows the start itself:
Spark hands it every batch's range (`partitions`) and every committed end (`commit`), and on a
restart plans the last batch again before asking for the next one.

The sink commits each micro-batch with a `txn` action (appId: the query's id from its checkpoint,
version: the batch id), so a batch replayed after a failure finds itself recorded and commits
nothing."""
from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from skiplake.errors import InvalidArgumentError, NotATableError
from skiplake.log.arrow_reads import read_file
from skiplake.log.changes import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION
from skiplake.log.location import basename, dirname, resolve
from skiplake.log.schema import Field, Schema
from skiplake.log.snapshot import Snapshot
from skiplake.log.storage_for import has_log, storage_at
from skiplake.log.stream_reads import StreamOffset, StreamOptions, StreamPlanner, StreamUnit
from skiplake.spark.source.batch import TableLayout, WriteTarget, file_groups, option, table_path, task_files
from skiplake.txn.file_commits import AppTransaction


def change_schema(schema: Schema) -> Schema:
    """The table's schema with the change feed's columns."""
    return Schema((*schema.fields, Field(CHANGE_TYPE, "string"), Field(COMMIT_VERSION, "long"),
                   Field(COMMIT_TIMESTAMP, "timestamp")))


def stream_snapshot(options: Mapping[str, str]) -> Snapshot:
    """The table a stream reads, at its latest version."""
    path = table_path(options)
    if not has_log(path):
        raise NotATableError(path)
    return Snapshot.load(path)


class UnitGroup(InputPartition):
    """The stream units one task reads."""

    def __init__(self, units: list[StreamUnit]) -> None:
        """A group of `units`."""
        super().__init__(len(units))
        self.units = units


class StreamReader(DataSourceStreamReader):
    """`spark.readStream.format("skiplake").load(path)`."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        """The source of the table in `options`, delivering rows of `schema`."""
        snapshot = stream_snapshot(options)
        self.options = StreamOptions.parse(options)
        self.layout = TableLayout.of(snapshot, options)
        self.arrow_schema = to_arrow_schema(schema)
        self._planner: StreamPlanner | None = None
        self._cursor: StreamOffset | None = None
        self._initial: StreamOffset | None = None

    def __getstate__(self) -> dict[str, Any]:
        """What a read task needs: not the planner (it stays on the driver)."""
        return {**self.__dict__, "_planner": None}

    @property
    def planner(self) -> StreamPlanner:
        """The planner, made on first use on the driver."""
        if self._planner is None:
            self.layout.reach()
            self._planner = StreamPlanner(self.layout.path, self.options, self.layout.schema)
        return self._planner

    def initialOffset(self) -> dict:
        """Before the starting snapshot, or before the starting version's commit."""
        return self._initial_offset().to_json()

    def _initial_offset(self) -> StreamOffset:
        # Fixed when first asked: Spark asks again for the first batch's start, after
        # latestOffset gave its end, and a commit in between must not move the start past it
        # (the first batch would be empty, its files lost).
        if self._initial is None:
            self._initial = self.planner.initial_offset()
        return self._initial

    def latestOffset(self) -> dict:
        """The end of the next micro-batch, within maxFilesPerTrigger and maxBytesPerTrigger."""
        start = self._cursor or self._initial_offset()
        end = self.planner.next_offset(start)
        self._cursor = end
        return end.to_json()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """The units after `start` up to `end`, in tasks."""
        first, last = StreamOffset.from_json(start), StreamOffset.from_json(end)
        self._follow(last)
        units = self.planner.units_between(first, last)
        if self.options.read_change_feed and any(not u.timestamp_ms for u in units):
            times = self.planner.commit_times()    # one listing of the log for the whole batch
            units = [u if u.timestamp_ms else replace(u, timestamp_ms=times.get(u.version, 0)) for u in units]
        return [UnitGroup(g) for g in file_groups(units) if g]

    def commit(self, end: dict) -> None:
        """A micro-batch up to `end` is done."""
        self._follow(StreamOffset.from_json(end))

    def _follow(self, offset: StreamOffset) -> None:
        if self._cursor is None or offset.key > self._cursor.key:
            self._cursor = offset

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The rows of the task's units (with the change feed's columns under readChangeFeed)."""
        assert isinstance(partition, UnitGroup)
        layout = self.layout
        layout.reach()
        if not self.options.read_change_feed:
            for unit in partition.units:
                yield from read_file(layout.path, unit.file, layout.schema, layout.partition_columns, layout.mode,
                                     self.arrow_schema, unit.rows)
            return
        yield from _change_batches(layout, partition.units, self.arrow_schema)


def _change_batches(layout: TableLayout, units: Sequence[StreamUnit], arrow_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    n = len(layout.schema.fields)
    table_schema = pa.schema(list(arrow_schema)[:n])
    with_type = pa.schema([*table_schema, arrow_schema.field(CHANGE_TYPE)])
    for unit in units:
        in_file = unit.change_type is None
        schema = Schema((*layout.schema.fields, Field(CHANGE_TYPE, "string"))) if in_file else layout.schema
        for batch in read_file(layout.path, unit.file, schema, layout.partition_columns, layout.mode,
                               with_type if in_file else table_schema, unit.rows):
            rows = batch.num_rows
            columns = list(batch.columns)
            if not in_file:
                columns.append(pa.array([unit.change_type] * rows, pa.string()))
            columns.append(pa.array([unit.version] * rows, arrow_schema.field(COMMIT_VERSION).type))
            stamp = pa.scalar(unit.timestamp_ms * 1000, pa.timestamp("us", "UTC"))
            columns.append(pa.array([stamp.as_py()] * rows, arrow_schema.field(COMMIT_TIMESTAMP).type))
            yield pa.RecordBatch.from_arrays(columns, schema=arrow_schema)


def query_id(options: Mapping[str, str]) -> str:
    """The streaming query's id, which its checkpoint keeps across restarts (Delta's sink uses it
    as the txn appId). The option `txnAppId` names another."""
    given = option(options, "txnAppId")
    if given:
        return given
    checkpoint = option(options, "checkpointLocation")
    if not checkpoint:
        raise InvalidArgumentError("the skiplake sink needs the query's checkpointLocation option (or a txnAppId) "
                                   "to commit each micro-batch exactly once")
    where = resolve(checkpoint.rstrip("/") + "/metadata")
    return str(json.loads(storage_at(dirname(where)).read(basename(where)))["id"])


class StreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("skiplake").option("checkpointLocation", c).start(path)`."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        """The sink of rows of `schema`; `overwrite` in output mode complete."""
        self.options = dict(options)
        self.schema = schema
        self.complete = overwrite
        self.app_id = query_id(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        """Write one task's rows of the micro-batch as data files."""
        return task_files(WriteTarget.of(self.options, self.schema), iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Commit the micro-batch with its txn action; nothing when the batch was committed before."""
        target = WriteTarget.of(self.options, self.schema)
        target.commit(messages, self.complete, AppTransaction(self.app_id, batchId), self.options, "STREAMING UPDATE")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Delete the files of a failed micro-batch."""
        WriteTarget.of(self.options, self.schema).abort(messages)
