"""A Lake: tables as folders under one root, and Spark SQL over them."""
from __future__ import annotations

import os
from typing import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType
from sqlglot import exp

from skiplake.errors import InvalidArgumentError, NotATableError
from skiplake.expr.parse import parse_sql
from skiplake.log.schema import Schema
from skiplake.log.snapshot import LOG_DIR
from skiplake.table import BucketSpec, Table


class Lake:
    def __init__(self, spark: SparkSession, root: str) -> None:
        self.spark = spark
        self.root = os.path.abspath(root)
        os.makedirs(self.root, exist_ok=True)

    def path_of(self, name: str) -> str:
        if not name or "/" in name or name.startswith((".", "_")):
            raise InvalidArgumentError(f"{name!r} is not a valid table name: use letters, digits and _")
        return os.path.join(self.root, name)

    def create_table(self, name: str, schema: StructType | Schema | str,
                     partition_by: Sequence[str] | None = None, bucket_by: BucketSpec | None = None,
                     properties: Mapping[str, str] | None = None, description: str | None = None) -> Table:
        return Table.create(self.spark, self.path_of(name), schema, partition_by, bucket_by, properties,
                            name=name, description=description)

    def table(self, name: str, version: int | None = None, timestamp: str | None = None) -> Table:
        return Table.open(self.spark, self.path_of(name), version, timestamp)

    def tables(self) -> list[str]:
        out = []
        for entry in sorted(os.listdir(self.root)):
            if os.path.isdir(os.path.join(self.root, entry, LOG_DIR)):
                out.append(entry)
        return out

    def sql(self, query: str) -> DataFrame:
        """Run Spark SQL in which lake tables are named like any table."""
        for name in self._referenced_tables(query):
            self.table(name).read().createOrReplaceTempView(name)
        return self.spark.sql(query)

    def _referenced_tables(self, query: str) -> list[str]:
        tree = parse_sql(query)
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        known = {t.lower(): t for t in self.tables()}
        names = []
        for t in tree.find_all(exp.Table):
            n = t.name.lower()
            if n in ctes:
                continue
            if n in known:
                names.append(known[n])
            elif not t.db:
                try:
                    self.spark.catalog.getTable(t.name)
                except Exception:
                    raise NotATableError(os.path.join(self.root, t.name),
                                         f"the query names table {t.name!r}; the lake has {sorted(known.values())}")
        return sorted(set(names))
