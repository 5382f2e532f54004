"""A Lake: tables as folders under one root, and Spark SQL over them."""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType
from sqlglot import exp

from skiplake.errors import InvalidArgumentError, InvalidPredicateError, NotATableError
from skiplake.expr.parse import parse_sql
from skiplake.log.schema import Schema
from skiplake.log.snapshot import LOG_DIR
from skiplake.skipping.report import ScanReport
from skiplake.table import BucketSpec, Table

if TYPE_CHECKING:
    from skiplake.spark.bucket_join import JoinReport


class QueryExplain(list):
    """lake.explain's answer: a list of ScanReport (one per table reference), plus `joins`."""

    def __init__(self, reports: Sequence[ScanReport], joins: Sequence["JoinReport"] = ()) -> None:
        super().__init__(reports)
        self.joins = list(joins)

    def text(self) -> str:
        return "\n".join([r.text() for r in self] + [j.text() for j in self.joins])

    def to_dict(self) -> dict:
        return {"scans": [r.to_dict() for r in self], "joins": [j.to_dict() for j in self.joins]}


class Lake:
    """Tables as folders under `root`, and/or the tables of a Glue-compatible `catalog` (a
    GlueCatalog, a database URL, a server endpoint or a boto3 Glue client) in `database`."""

    def __init__(self, spark: SparkSession, root: str | None = None, catalog: Any = None,
                 database: str = "default") -> None:
        if root is None and catalog is None:
            raise InvalidArgumentError("Lake needs a root folder, a catalog, or both")
        self.spark = spark
        self.root = os.path.abspath(root) if root is not None else None
        if self.root is not None:
            os.makedirs(self.root, exist_ok=True)
        self.catalog = None
        if catalog is not None:
            from skiplake.catalog.client import catalog_client
            self.catalog = catalog_client(catalog)
        self.database = database

    def catalog_table(self, name: str) -> Any:
        """The catalog's table `name` (`db.table` or a table of this lake's database): a skiplake
        Table when its location holds a Delta log, else a CatalogTable of Hive-style Parquet."""
        if self.catalog is None:
            raise InvalidArgumentError("this Lake has no catalog; pass catalog= to Lake(...)")
        from skiplake.errors import EntityNotFoundError
        database, _, table = name.rpartition(".")
        database = database or self.database
        try:
            spec = self.catalog.call("GetTable", {"DatabaseName": database, "Name": table})["Table"]
        except EntityNotFoundError:
            raise NotATableError(f"{database}.{table}", "the catalog has no such table") from None
        except Exception as e:  # boto3's EntityNotFoundException
            if type(e).__name__ == "EntityNotFoundException":
                raise NotATableError(f"{database}.{table}", "the catalog has no such table") from None
            raise
        location = ((spec.get("StorageDescriptor") or {}).get("Location") or "").removeprefix("file:")
        if location and os.path.isdir(os.path.join(location, LOG_DIR)):
            return Table.open(self.spark, location)
        from skiplake.spark.catalog_tables import CatalogTable
        return CatalogTable(self.spark, self.catalog, database, table, spec)

    def _catalog_table_or_none(self, name: str) -> Any:
        try:
            return self.catalog_table(name)
        except NotATableError:
            return None

    def path_of(self, name: str) -> str:
        if self.root is None:
            raise InvalidArgumentError(f"this Lake has no root folder for table {name!r}; use catalog_table(...)")
        if not name or "/" in name or name.startswith((".", "_")):
            raise InvalidArgumentError(f"{name!r} is not a valid table name: use letters, digits and _")
        return os.path.join(self.root, name)

    def create_table(self, name: str, schema: StructType | Schema | str,
                     partition_by: Sequence[str] | None = None, bucket_by: BucketSpec | None = None,
                     properties: Mapping[str, str] | None = None, description: str | None = None) -> Table:
        return Table.create(self.spark, self.path_of(name), schema, partition_by, bucket_by, properties,
                            name=name, description=description)

    def table(self, name: str, version: int | None = None, timestamp: str | None = None) -> Any:
        """A table under the root, or else (with a catalog) the catalog's table of that name."""
        if self.root is not None and os.path.isdir(os.path.join(self.root, name, LOG_DIR)) or self.catalog is None:
            return Table.open(self.spark, self.path_of(name), version, timestamp)
        return self.catalog_table(name)

    def tables(self) -> list[str]:
        if self.root is None:
            return []
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

    def explain(self, query: str) -> "QueryExplain":
        """One scan report per lake table reference of `query`: what `sql(query)` would read.
        Its `joins` say, for each join of two lake tables, whether it runs as a bucket join."""
        from skiplake.spark.sql import plan_query
        tree = parse_sql(query)
        scans = plan_query(self.spark, query, self._tables_of(query, tree), tree)
        if not scans.analysed:
            raise InvalidArgumentError(f"cannot plan the scans of this query ({scans.reason}); "
                                       "lake.sql() runs it over whole tables")
        return QueryExplain(scans.reports, scans.joins)

    def bucket_join(self, left: "Table | str", right: "Table | str",
                    on: str | Sequence[str] | Sequence[tuple[str, str]], how: str = "inner",
                    left_where: str | None = None, right_where: str | None = None) -> DataFrame:
        """Join two lake tables on `on`; when both are bucketed alike on those columns, with no
        shuffle of either side (each task joins one bucket's files). See explain_join."""
        df, _ = self._bucket_join(left, right, on, how, left_where, right_where)
        return df

    def explain_join(self, left: "Table | str", right: "Table | str",
                     on: str | Sequence[str] | Sequence[tuple[str, str]], how: str = "inner",
                     left_where: str | None = None, right_where: str | None = None) -> "JoinReport":
        """What bucket_join(...) would do: each side's scan, and bucket join or why not."""
        _, report = self._bucket_join(left, right, on, how, left_where, right_where)
        return report

    def _bucket_join(self, left: "Table | str", right: "Table | str", on: Any, how: str,
                     left_where: str | None, right_where: str | None) -> tuple[DataFrame, "JoinReport"]:
        from skiplake.spark.bucket_join import bucket_join
        tables = []
        for t in (left, right):
            table = self.table(t) if isinstance(t, str) else t
            if not isinstance(table, Table):
                raise InvalidArgumentError(f"{t!r} is not a skiplake (Delta) table; bucket joins need two")
            tables.append(table)
        labels = [t if isinstance(t, str) else None for t in (left, right)]
        return bucket_join(self.spark, tables[0], tables[1], on, how, left_where, right_where, labels[0], labels[1])

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
            elif not t.db and self.catalog is not None and (found := self._catalog_table_or_none(t.name)) is not None:
                out[n] = found
            elif not t.db:
                try:
                    self.spark.catalog.getTable(t.name)
                except Exception:
                    where = os.path.join(self.root, t.name) if self.root else f"{self.database}.{t.name}"
                    raise NotATableError(where,
                                         f"the query names table {t.name!r}; the lake has {sorted(known.values())}")
        return out
