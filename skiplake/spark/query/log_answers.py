"""`lake.sql` answers from the log: COUNT, MIN and MAX over one lake table, read from the log's
stats instead of the data files where the stats are exact (skiplake.skipping.log_aggregates).

The query must be one SELECT over one lake table (no join, subquery, DISTINCT, HAVING, ORDER BY
or LIMIT) whose items are COUNT(*), COUNT(col), MIN(col), MAX(col) and the columns it groups by;
it may group by partition columns and filter by anything. Files whose stats cannot answer (a
WHERE their stats do not decide, a deletion vector under MIN, a string cut to a prefix, ...)
are read and aggregated by Spark, and the two parts merged: the answer is always the scan's.
Any other query goes through the usual planning. Spark itself names and types the result's
columns, by analysing the query over an empty view of the table.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from sqlglot import exp

from skiplake.errors import InvalidPredicateError
from skiplake.expr.parse import bind
from skiplake.expr.sql import sql_literal, to_sql
from skiplake.expr.tree import Node
from skiplake.log.snapshot import Snapshot
from skiplake.skipping.log_aggregates import (
    COUNT,
    COUNT_ALL,
    MAX,
    MIN,
    Aggregate,
    LogAggregation,
    aggregate_from_log,
    merge,
)
from skiplake.skipping.plan import plan_scan
from skiplake.skipping.report import LogAnswerReport
from skiplake.spark.query.model import QueryExplain, Resolver
from skiplake.spark.query.references import parse
from skiplake.spark.reads.log_job import JobAggregation, aggregate_files
from skiplake.spark.reads.planned_reads import read_files
from skiplake.spark.session.spark_types import to_spark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Delta's setting for answering aggregates from the log; skiplake follows it too.
ENABLED = "spark.databricks.delta.optimizeMetadataQuery.enabled"
# A query partly answered from the log reads the rest in a query of its own, which costs more than
# reading everything in one when few files are answered: it needs this many answered per file read.
HYBRID_RATIO = 3
# Clauses a query answered from the log may have (sqlglot's argument names, both spellings).
_ALLOWED = {"expressions", "from", "from_", "where", "group"}
_KINDS: dict[type, str] = {exp.Min: MIN, exp.Max: MAX}


@dataclass(frozen=True)
class AggregateQuery:
    """A query of the shape the log can answer."""
    tree: exp.Select
    table: exp.Table
    aggregates: tuple[Aggregate, ...]
    group_by: tuple[str, ...]          # partition columns, the schema's spelling
    where: Node | None


@dataclass
class LogAnswer:
    """A query answered (at least partly) from the log, ready to run or to explain."""
    query: AggregateQuery
    snapshot: Snapshot              # the table (by a job: with only the files to read)
    aggregation: LogAggregation
    by_job: JobAggregation | None = None  # the whole table's totals when a Spark job aggregated it

    def explain(self) -> QueryExplain:
        """The scan report (the files read: those the stats could not answer) and the log's part."""
        snapshot, agg = self.snapshot, self.aggregation
        report = plan_scan(snapshot, self.query.where).report
        if self.by_job is not None:
            job = self.by_job
            report = replace(report, files_total=job.files_total, bytes_total=job.bytes_total,
                             partitions_total=job.partitions_total, rows_total=None, replay=job.replay)
        rows = snapshot.file_rows
        read = rows.filter(pa.array(agg.scan)) if rows.num_rows else rows
        report = replace(report, files_selected=read.num_rows, bytes_selected=int(sum(read.column("size").to_pylist())),
                         rows_selected=None, label=self.query.table.sql(dialect="spark"))
        log = LogAnswerReport(agg.from_stats, read.num_rows, agg.excluded)
        return QueryExplain([report], notes=[log.text()], log_answer=log)

    def run(self, spark: "SparkSession") -> "DataFrame":
        """The query's result: the stats' part merged with a scan of the files they cannot answer."""
        groups = {k: list(v) for k, v in self.aggregation.groups.items()}
        if self.aggregation.scan.any():
            for key, values in self._scanned(spark):
                merge(self.query.aggregates, groups, key, values)
        if not self.query.group_by and not groups:
            groups[()] = [0 if a.kind in (COUNT_ALL, COUNT) else None for a in self.query.aggregates]
        schema = _result_schema(spark, self.query, self.snapshot)
        return _frame(spark, schema, [self._row(key, values) for key, values in groups.items()])

    def _scanned(self, spark: "SparkSession") -> list[tuple[tuple, list[Any]]]:
        from pyspark.sql import functions as F

        snapshot, q = self.snapshot, self.query
        files = self.aggregation.files_to_read(snapshot)
        df = read_files(spark, snapshot.table_path, snapshot.schema, snapshot.partition_columns, files,
                        column_mapping=snapshot.column_mapping)
        if q.where is not None:
            df = df.filter(to_sql(q.where))
        exprs = [F.count(F.lit(1)) if a.kind == COUNT_ALL else
                 getattr(F, a.kind)(F.col(f"`{a.column}`")) for a in q.aggregates]
        rows = df.groupBy(*[F.col(f"`{c}`") for c in q.group_by]).agg(*exprs).collect()
        n = len(q.group_by)
        return [(tuple(r[:n]), list(r[n:])) for r in rows]

    def _row(self, key: tuple, values: list[Any]) -> tuple:
        """The result row of one group: the SELECT's items in order."""
        out = []
        aggregates = iter(values)
        for item in self.query.tree.expressions:
            inner = item.this if isinstance(item, exp.Alias) else item
            if isinstance(inner, exp.Column):
                out.append(key[_position(self.query.group_by, inner.name)])
            else:
                out.append(next(aggregates))
        return tuple(out)


def enabled(spark: "SparkSession") -> bool:
    """Whether the session lets lake.sql answer aggregates from the log (ENABLED, default true)."""
    return str(spark.conf.get(ENABLED, "true")).strip().lower() != "false"


def plan_log_answer(spark: "SparkSession", query: str, resolver: Resolver) -> LogAnswer | None:
    """The log's answer to `query`, when it has the shape and the stats of at least one file
    answer it; None otherwise (the query then takes the usual path). A table whose files are
    pending (past the replay bound) is aggregated by a Spark job (log_job.aggregate_files)."""
    tree = parse(query)
    if not isinstance(tree, exp.Select) or any(v for k, v in tree.args.items() if k not in _ALLOWED):
        return None
    table = _single_table(tree)
    if table is None:
        return None
    source = resolver.source(table.name)
    if not isinstance(source, Snapshot):
        return None
    matched = _matched(tree, table, source)
    if matched is None or _zoned(matched, source):
        return None
    by_job = None
    if source.files_pending:
        by_job = aggregate_files(spark, source, matched.aggregates, matched.group_by, matched.where)
        source, aggregation = by_job.unread, by_job.aggregation
    else:
        aggregation = aggregate_from_log(source, matched.aggregates, matched.group_by, matched.where)
    read = int(aggregation.scan.sum())
    if read and aggregation.from_stats < HYBRID_RATIO * read:
        # The stats answer too little to pay for a second query: the usual planning reads what it must.
        return None
    return LogAnswer(matched, source, aggregation, by_job)


def _zoned(query: AggregateQuery, snapshot: Snapshot) -> bool:
    """Whether a result column would be a timestamp: their stats are not exact, and their values
    would have to cross time zones to become SQL again."""
    used = [a.column for a in query.aggregates if a.column and a.kind != COUNT] + list(query.group_by)
    return any(snapshot.schema.field(c).type in ("timestamp", "timestamp_ntz") for c in used)


def _single_table(tree: exp.Select) -> exp.Table | None:
    source = tree.args.get("from_") or tree.args.get("from")
    table = source.this if isinstance(source, exp.From) else None
    if (not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier) or table.db or table.catalog
            or any(table.args.get(k) for k in ("sample", "version", "when", "pivots", "joins", "laterals"))):
        return None
    return table


def _matched(tree: exp.Select, table: exp.Table, snapshot: Snapshot) -> AggregateQuery | None:
    names = {table.name.lower(), (table.alias or table.name).lower()}
    group_by = _group_by(tree, snapshot, names)
    aggregates = _aggregates(tree, snapshot, names, group_by) if group_by is not None else None
    if group_by is None or not aggregates:
        return None
    where = tree.args.get("where")
    if where is not None and any(c.table and c.table.lower() not in names for c in where.find_all(exp.Column)):
        return None
    try:
        node = bind(where.this.sql(dialect="spark"), snapshot.schema) if where is not None else None
    except InvalidPredicateError:
        return None
    return AggregateQuery(tree, table, tuple(aggregates), tuple(group_by), node)


def _group_by(tree: exp.Select, snapshot: Snapshot, names: set[str]) -> list[str] | None:
    """The GROUP BY columns, when all are partition columns; None otherwise."""
    group = tree.args.get("group")
    out: list[str] = []
    for g in (group.expressions if group is not None else []):
        column = _column(g, snapshot, names)
        if column is None or column not in snapshot.partition_columns:
            return None
        out.append(column)
    return out


def _aggregates(tree: exp.Select, snapshot: Snapshot, names: set[str], group_by: list[str]) -> list[Aggregate] | None:
    """The SELECT's aggregates in order, when every other item is a GROUP BY column; None otherwise."""
    out: list[Aggregate] = []
    for item in tree.expressions:
        inner = item.this if isinstance(item, exp.Alias) else item
        if isinstance(inner, exp.Column):
            if _column(inner, snapshot, names) not in group_by:
                return None
            continue
        aggregate = _aggregate(inner, snapshot, names)
        if aggregate is None:
            return None
        out.append(aggregate)
    return out


def _aggregate(node: exp.Expression, snapshot: Snapshot, names: set[str]) -> Aggregate | None:
    if isinstance(node, exp.Count):
        arg = node.this
        if isinstance(arg, (exp.Star, exp.Literal)):   # COUNT(*), COUNT(1): every row
            return Aggregate(COUNT_ALL)
        column = _column(arg, snapshot, names)
        return Aggregate(COUNT, column) if column is not None else None
    kind = _KINDS.get(type(node))
    if kind is None or node.expressions:
        return None
    column = _column(node.this, snapshot, names)
    return Aggregate(kind, column) if column is not None else None


def _column(node: Any, snapshot: Snapshot, names: set[str]) -> str | None:
    """The top-level column `node` names (the schema's spelling), or None."""
    if not isinstance(node, exp.Column) or (node.table and node.table.lower() not in names) or node.args.get("db"):
        return None
    field = snapshot.schema.find(node.name)
    return field.name if field is not None else None


def _frame(spark: "SparkSession", schema: Any, rows: list[tuple]) -> "DataFrame":
    """`rows` as a DataFrame of `schema`: an inline table Spark holds in the driver, so reading
    it takes no job (createDataFrame would run one, through a Python worker)."""
    names = [f"c{i}" for i in range(len(schema.fields))]
    columns = ", ".join(f"CAST({n} AS {f.dataType.simpleString()}) AS `{f.name.replace('`', '``')}`"
                        for n, f in zip(names, schema.fields))
    values = ", ".join("(" + ", ".join(sql_literal(v) for v in row) + ")" for row in rows) or \
        "(" + ", ".join("NULL" for _ in names) + ")"
    return spark.sql(f"SELECT {columns} FROM VALUES {values} AS v({', '.join(names)})" + ("" if rows else " WHERE false"))


def _position(group_by: tuple[str, ...], name: str) -> int:
    return next(i for i, c in enumerate(group_by) if c.lower() == name.lower())


def _result_schema(spark: "SparkSession", query: AggregateQuery, snapshot: Snapshot) -> Any:
    """The result's columns as Spark names and types them: the query analysed over an empty view."""
    view = f"__skiplake_log_{uuid.uuid4().hex[:12]}"
    spark.createDataFrame([], to_spark(snapshot.schema)).createOrReplaceTempView(view)
    try:
        tree = query.tree.copy()
        table = next(t for t in tree.find_all(exp.Table))
        table.replace(exp.alias_(exp.to_table(view), query.table.alias or query.table.name, table=True))
        return spark.sql(tree.sql(dialect="spark")).schema
    finally:
        spark.catalog.dropTempView(view)


__all__ = ["AggregateQuery", "LogAnswer", "ENABLED", "enabled", "plan_log_answer"]
