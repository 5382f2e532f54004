"""The `skiplake` data source and its registration with a session (classic or Spark Connect)."""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from skiplake.spark.session.spark_types import to_spark
from skiplake.spark.source.batch import BatchReader, BatchWriter, option, read_snapshot
from skiplake.spark.source.streaming import StreamReader, StreamWriter, change_schema, stream_snapshot

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NAME = "skiplake"
# Spark hands filters to a Python data source's reader only with this setting on.
FILTER_PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
_registered: "weakref.WeakSet[SparkSession]" = weakref.WeakSet()


class SkiplakeDataSource(DataSource):
    """`format("skiplake")`: reads, writes and streams of a table given by its path."""

    @classmethod
    def name(cls) -> str:
        """The format's name."""
        return NAME

    def schema(self) -> StructType:
        """The table's schema (with the change feed's columns under readChangeFeed)."""
        if _flag(option(self.options, "readChangeFeed")):
            return to_spark(change_schema(stream_snapshot(self.options).schema))
        return to_spark(read_snapshot(self.options, files_later_from=0).schema)   # no file needed

    def reader(self, schema: StructType) -> DataSourceReader:
        """A batch read of the table."""
        return BatchReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """A batch write (append or overwrite) of rows of `schema`."""
        return BatchWriter(self.options, schema, overwrite)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A streaming read of the table."""
        return StreamReader(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """The exactly-once streaming sink."""
        return StreamWriter(self.options, schema, overwrite)


def _flag(text: str | None) -> bool:
    return str(text).strip().lower() == "true"


def register(spark: "SparkSession") -> None:
    """Make `format("skiplake")` known to `spark` and let it take pushed filters; again is a no-op."""
    if spark in _registered:
        return
    spark.dataSource.register(SkiplakeDataSource)
    spark.conf.set(FILTER_PUSHDOWN, "true")
    _registered.add(spark)
