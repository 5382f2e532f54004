"""What the stages of `lake.sql` planning share: the query, its lake table references, the reports."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol, Sequence, Union

from skiplake.expr.sql import to_sql
from skiplake.expr.tree import Node
from skiplake.log.schema import Schema
from skiplake.log.snapshot import Snapshot
from skiplake.skipping.plan import ScanPlan, plan_scan
from skiplake.skipping.report import ScanReport
from skiplake.spark.bucket_join import JoinReport
from skiplake.spark.catalog_tables import CatalogTable
from skiplake.spark.read import read_planned
from skiplake.spark.types import to_spark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType
    from sqlglot import exp

# What a lake table name stands for in one query: a Delta table pinned to a snapshot, or a
# catalog table of Hive-style Parquet.
Source = Union[Snapshot, CatalogTable]


def whole_table(spark: "SparkSession", source: Source) -> "DataFrame":
    """Every row of a lake table, as plain Spark would read it."""
    if isinstance(source, CatalogTable):
        return source.read()
    return read_planned(spark, source, plan_scan(source).files)


class Resolver(Protocol):
    """How a query's table names become lake tables (the Lake implements it)."""

    def source(self, name: str) -> Source | None:
        """The lake table `name` (unqualified, any case), pinned now; None if the lake has none."""

    def unknown(self, name: str) -> Exception:
        """The error for a name that is neither a lake table nor a table Spark knows."""


@dataclass
class TableReference:
    """One place a lake table is named in the query."""
    source: Source
    name: str                       # the lake table's name (lower case)
    label: str                      # how the query names it ("store_sales AS ss")
    view: str                       # the temporary view that stands for it while the query runs
    alias: str = ""                 # the query's alias for it, if any
    filters: list[list[str]] = field(default_factory=list)  # per occurrence in the plan: conjuncts
    plan: ScanPlan | None = None     # a Delta table's planned files
    where: str | None = None         # a catalog table's pushed predicate
    bucketed: bool = False           # read as a bucketed relation (one side of a bucket join)
    merge_hint: bool = False         # the right side of a bucket join: keep Spark from broadcasting it

    @property
    def snapshot(self) -> Snapshot | None:
        return self.source if isinstance(self.source, Snapshot) else None

    @property
    def schema(self) -> Schema:
        return self.source.schema

    def relation_schema(self) -> "StructType | str":
        """What the stand-in relation of the analysis is declared with (a StructType or DDL)."""
        return to_spark(self.source.schema) if isinstance(self.source, Snapshot) else self.source.ddl

    def plan_with(self, predicate: Node | None) -> None:
        if isinstance(self.source, Snapshot):
            self.plan = plan_scan(self.source, predicate)
            self.plan.report = replace(self.plan.report, label=self.label)
        else:
            self.where = to_sql(predicate) if predicate is not None else None

    def dataframe(self, spark: "SparkSession") -> "DataFrame":
        if isinstance(self.source, CatalogTable):
            return self.source.read(self.where)
        assert self.plan is not None
        df = read_planned(spark, self.source, self.plan.files, bucketed=self.bucketed)
        return df.hint("merge") if self.merge_hint else df


@dataclass
class QueryPlan:
    """A query as the stages leave it: its references (renamed to views in `sql`), their scan
    plans and the joins planned; `analysed` is False when it runs over whole tables instead."""
    query: str                                   # the query as the user wrote it
    tree: "exp.Expression | None"                # the query parsed by sqlglot, None if it cannot be
    sql: str = ""                                # the query as it runs (references renamed to views)
    references: list[TableReference] = field(default_factory=list)
    positions: dict[int, int] = field(default_factory=dict)  # a reference's offset in `query` -> its index
    sources: dict[str, Source] = field(default_factory=dict)  # lake tables named (lower case) -> source
    analysed: bool = True
    reason: str = ""                             # why it was not analysed
    joins: list[JoinReport] = field(default_factory=list)  # joins of two lake tables, one bucketed

    def give_up(self, reason: str) -> "QueryPlan":
        """Run over whole tables, as plain Spark would, and say why."""
        self.analysed = False
        self.reason = reason
        return self

    @property
    def reports(self) -> list[ScanReport]:
        return [r.plan.report for r in self.references if r.plan is not None]


class QueryExplain(list):
    """lake.explain's answer: a list of ScanReport (one per table reference), plus `joins`."""

    def __init__(self, reports: Sequence[ScanReport], joins: Sequence[JoinReport] = ()) -> None:
        super().__init__(reports)
        self.joins = list(joins)

    def text(self) -> str:
        return "\n".join([r.text() for r in self] + [j.text() for j in self.joins])

    def to_dict(self) -> dict:
        return {"scans": [r.to_dict() for r in self], "joins": [j.to_dict() for j in self.joins]}
