"""A Lake: tables as folders under one root, and Spark SQL over them."""
from __future__ import annotations

import os
import re
from typing import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType
from sqlglot import exp

from skiplake.errors import InvalidArgumentError, InvalidPredicateError, NotATableError
from skiplake.expr.parse import parse_sql
from skiplake.log.schema import Schema
from skiplake.log.snapshot import LOG_DIR
from skiplake.scan import ScanReport
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
        """Run Spark SQL in which lake tables are named like any table. The literal predicates
        Spark can push to each table reference prune its partitions and files first."""
        from skiplake.spark.sql import run_query
        try:
            tree = parse_sql(query)
        except InvalidPredicateError:
            # Spark SQL that sqlglot cannot read: every lake table the text names, whole.
            names = [n for n in self.tables() if re.search(rf"\b{re.escape(n)}\b", query, re.IGNORECASE)]
            df, _ = run_query(self.spark, query, {n.lower(): self.table(n) for n in names})
            return df
        df, _ = run_query(self.spark, query, self._tables_of(query, tree), tree)
        return df

    def explain(self, query: str) -> list[ScanReport]:
        """One scan report per lake table reference of `query`: what `sql(query)` would read."""
        from skiplake.spark.sql import plan_query
        tree = parse_sql(query)
        scans = plan_query(self.spark, query, self._tables_of(query, tree), tree)
        if not scans.analysed:
            raise InvalidArgumentError(f"cannot plan the scans of this query ({scans.reason}); "
                                       "lake.sql() runs it over whole tables")
        return scans.reports

    def _tables_of(self, query: str, tree: exp.Expression) -> dict[str, Table]:
        from skiplake.spark.sql import names_cte
        """The lake tables a query names (lower-case name -> Table pinned to its latest version).

        A name that is neither a lake table nor in Spark's catalog is an error that lists the
        lake's tables."""
        known = {t.lower(): t for t in self.tables()}
        out: dict[str, Table] = {}
        for t in tree.find_all(exp.Table):
            if not isinstance(t.this, exp.Identifier):
                continue  # a table-valued function such as range(10)
            n = t.name.lower()
            if names_cte(t) or n in out:
                continue
            if n in known and not t.db:
                out[n] = self.table(known[n])
            elif not t.db:
                try:
                    self.spark.catalog.getTable(t.name)
                except Exception:
                    raise NotATableError(os.path.join(self.root, t.name),
                                         f"the query names table {t.name!r}; the lake has {sorted(known.values())}")
        return out
