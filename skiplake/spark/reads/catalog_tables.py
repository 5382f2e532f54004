"""Hive-style partitioned Parquet tables registered in a Glue-compatible catalog, read by Spark.

`read(where)` sends the part of `where` that names only partition keys to GetPartitions as a
Glue expression (the catalog answers from a partition index when it has one), then reads just
the returned locations. Spark filters the rows by the whole `where` afterwards, so a conjunct
that cannot be written in Glue's language is simply left out of the expression.

The table property `partition_filtering.enabled` = `false` turns the expression off: every
partition is fetched and filtered here, as Athena does without partition filtering.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from skiplake.catalog.client import CatalogClient, all_partitions
from skiplake.catalog.expression import matcher, parse
from skiplake.catalog.predicates import delta_type, glue_expression
from skiplake.errors import SkiplakeError
from skiplake.expr.parse import bind
from skiplake.expr.tree import conjuncts
from skiplake.expr.visitor import columns_of
from skiplake.layout.partitioning import HIVE_DEFAULT_PARTITION, partition_dir
from skiplake.log.location import join, resolve
from skiplake.log.schema import Field, Schema

# A catalog table's property, as Glue's: "false" sends GetPartitions no expression.
PARTITION_FILTERING = "partition_filtering.enabled"
# How a catalog spells a NULL partition value: as Spark writes it to Hive and Glue catalogs, or empty.
_NULL_VALUES = (HIVE_DEFAULT_PARTITION, "")


@dataclass
class CatalogTable:
    """A table of the catalog whose data is Hive-style partitioned Parquet (not a Delta table)."""
    spark: SparkSession
    client: CatalogClient
    database: str
    name: str
    spec: dict[str, Any]
    last_expression: str | None = field(default=None, init=False)   # what the latest read asked for
    last_partitions: int = field(default=0, init=False)             # how many partitions it read

    @property
    def partition_keys(self) -> list[tuple[str, str]]:
        """(name, catalog type) of each partition key, in order."""
        return [(k["Name"], k.get("Type", "string")) for k in self.spec.get("PartitionKeys") or []]

    @property
    def columns(self) -> list[tuple[str, str]]:
        """(name, catalog type) of each data column, in order (the partition keys not among them)."""
        sd = self.spec.get("StorageDescriptor") or {}
        return [(c["Name"], c.get("Type", "string")) for c in sd.get("Columns") or []]

    @property
    def location(self) -> str | None:
        """The table's root location; None when the catalog gives none."""
        return (self.spec.get("StorageDescriptor") or {}).get("Location")

    @property
    def properties(self) -> dict[str, str]:
        """The table's properties (its catalog Parameters)."""
        return dict(self.spec.get("Parameters") or {})

    @property
    def filtering_enabled(self) -> bool:
        """Whether GetPartitions is sent the partition expression (partition_filtering.enabled is not false)."""
        return self.properties.get(PARTITION_FILTERING, "true").strip().lower() != "false"

    @property
    def schema(self) -> Schema:
        """The table's columns, data then partition keys, in Delta's types."""
        return Schema(tuple(Field(n, delta_type(t)) for n, t in self.columns + self.partition_keys))

    @property
    def ddl(self) -> str:
        """The table's columns (data, then partition keys) as a Spark DDL string."""
        return ", ".join(f"`{n}` {t}" for n, t in self.columns + self.partition_keys)

    def partition_predicate(self, where: str | None) -> str | None:
        """The Glue expression for the conjuncts of `where` that name only partition keys."""
        if not where:
            return None
        keys = {n.lower() for n, _ in self.partition_keys}
        parts = []
        for c in conjuncts(bind(where, self.schema)):
            if {n.lower() for n in columns_of(c)} <= keys and columns_of(c):
                text = glue_expression(c)
                if text is not None:
                    parts.append(text)
        return " AND ".join(parts) if parts else None

    def partitions(self, where: str | None = None) -> list[dict[str, Any]]:
        """The catalog's partitions that may hold rows matching `where` (all when None): selected by the
        catalog, or, with partition filtering off, all fetched and filtered here."""
        expression = self.partition_predicate(where)
        self.last_expression = expression if self.filtering_enabled else None
        found = list(all_partitions(self.client, self.database, self.name, self.last_expression))
        if expression and not self.filtering_enabled:
            expr = parse(expression, self.partition_keys)
            names = [n for n, _ in self.partition_keys]
            test = matcher(expr)
            found = [p for p in found if test(dict(zip(names, p["Values"])))]
        return found

    def read(self, where: str | None = None, columns: Sequence[str] | None = None) -> DataFrame:
        """The rows matching `where` (all when None), of `columns` (all when None), read from only the
        partitions that may hold them; last_expression and last_partitions say what was asked and read."""
        parts = self.partitions(where)
        self.last_partitions = len(parts)
        df = self._read_partitions(parts)
        if where:
            df = df.filter(where)
        return df.select(*[F.col(f"`{c}`") for c in columns]) if columns else df

    def _read_partitions(self, parts: list[dict[str, Any]]) -> DataFrame:
        reader = self.spark.read.schema(self.ddl)
        if not parts:
            return self.spark.createDataFrame([], self.ddl)
        root = self.location.rstrip("/") if self.location else None
        names = [n for n, _ in self.partition_keys]
        locations = [(p.get("StorageDescriptor") or {}).get("Location", "") for p in parts]

        hive = root is not None and all(
            _canonical(loc) == join(_canonical(root), partition_dir(names, dict(zip(names, p["Values"]))))
            for loc, p in zip(locations, parts))
        if hive:
            return reader.option("basePath", root).parquet(*locations).select(
                *[F.col(f"`{n}`") for n, _ in self.columns + self.partition_keys])
        # Partitions anywhere: read each location and add its values as typed literals.
        data_ddl = ", ".join(f"`{n}` {t}" for n, t in self.columns)
        frames = []
        for loc, p in zip(locations, parts):
            df = self.spark.read.schema(data_ddl).parquet(loc)
            for (k, t), v in zip(self.partition_keys, p["Values"]):
                df = df.withColumn(k, F.lit(None if v in _NULL_VALUES else v).cast(t))
            frames.append(df)
        out = frames[0]
        for df in frames[1:]:
            out = out.unionByName(df)
        return out


def _canonical(location: str) -> str:
    """One spelling of a catalog location (a path, file:, s3://); others (gs://, hdfs://) are
    Spark's business and are compared as written. A file: location is not decoded: its folder
    names are escaped as a partition's folder name is (p=a%3Db), and compared so."""
    if location.startswith("file:"):
        return os.path.normpath(location.removeprefix("file:"))
    try:
        return resolve(location)
    except SkiplakeError:
        return location.rstrip("/")
