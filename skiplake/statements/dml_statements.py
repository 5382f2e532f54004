"""INSERT, UPDATE, DELETE and MERGE INTO, through the Table facade (pruned as its operations are)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from skiplake.errors import SchemaMismatchError, SqlStatementError, UnsupportedStatementError
from skiplake.statements import results
from skiplake.statements.names import open_table
from skiplake.statements.records import Delete, Insert, Merge, Statement, Update
from skiplake.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from skiplake.statements.lake_access import LakeAccess


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def unqualified(s: Statement, text: str, qualifiers: set[str], read: list[str]) -> str:
    """A condition or value of UPDATE / DELETE over the table alone: its columns qualified by the
    table's name or alias lose the qualifier, and the tables its subqueries read are added to
    `read`. A subquery that refers to the changed table's row (a correlated one) is refused, as
    MERGE says the same thing."""
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except (ParseError, TokenError) as e:
        raise SqlStatementError(s.text, f"cannot read {text!r}: {e}") from None
    quals = {q.lower() for q in qualifiers if q}
    for column in list(tree.find_all(exp.Column)):
        table = column.table.lower()
        if not table or table not in quals:
            continue
        if column.find_ancestor(exp.Subquery, exp.Select) is not None:
            raise UnsupportedStatementError(
                s.text, f"the subquery refers to the row of the table being changed ({column.sql(dialect='spark')})",
                fix="write the statement as MERGE INTO ... USING (the subquery) ON ...")
        column.set("table", None)
    read.extend(t.name for t in tree.find_all(exp.Table) if not t.db)
    return tree.sql(dialect="spark")


def _committed_metric(table: Table, version: int, before: int, key: str) -> int:
    """A count from the commit's operationMetrics (0 when nothing was committed)."""
    if version == before:
        return 0
    info = table.history(limit=1)[0]
    return int((info.get("operationMetrics") or {}).get(key, 0))


def update(lake: "LakeAccess", s: Update) -> "DataFrame":
    """UPDATE: delta-spark's num_affected_rows."""
    table = open_table(lake, s.table)
    quals = {s.alias or "", s.table.label}
    read: list[str] = []
    where = unqualified(s, s.where, quals, read) if s.where else None
    sets = {c: unqualified(s, v, quals, read) for c, v in s.assignments}
    before = table.version
    with lake.readable_by_name(read):
        version = table.update(where, sets)
    return results.frame(lake.spark, results.DML, [(_committed_metric(table, version, before, "numUpdatedRows"),)])


def delete(lake: "LakeAccess", s: Delete) -> "DataFrame":
    """DELETE: delta-spark's num_affected_rows."""
    table = open_table(lake, s.table)
    read: list[str] = []
    where = unqualified(s, s.where, {s.alias or "", s.table.label}, read) if s.where else None
    before = table.version
    with lake.readable_by_name(read):
        version = table.delete(where)
    return results.frame(lake.spark, results.DML, [(_committed_metric(table, version, before, "numDeletedRows"),)])


def insert(lake: "LakeAccess", s: Insert) -> "DataFrame":
    """INSERT INTO | OVERWRITE [(columns)] [REPLACE WHERE] query: the query's columns go to the
    table's by position (or to the columns named, or BY NAME), cast to their types as Spark's
    INSERT does."""
    table = open_table(lake, s.table)
    df = lake.sql(s.query)
    fields = {f.name.lower(): f for f in table.schema.fields}
    targets = _insert_targets(s, table, list(df.columns))
    exprs = [f"CAST({_quote(src)} AS {fields[t.lower()].dataType.simpleString()}) AS {_quote(fields[t.lower()].name)}"
             for src, t in zip(df.columns, targets)]
    cast = df.selectExpr(*exprs)
    if s.overwrite or s.replace_where is not None:
        _refuse_dynamic_overwrite(lake, s, table)
        read: list[str] = []
        where = unqualified(s, s.replace_where, {s.table.label}, read) if s.replace_where else None
        with lake.readable_by_name(read):
            table.overwrite(cast, where=where)
    else:
        table.append(cast)
    return results.empty(lake.spark)


def _insert_targets(s: Insert, table: Table, given: list[str]) -> list[str]:
    """The table's columns the query's columns go to, in order."""
    fields = {f.name.lower() for f in table.schema.fields}
    if s.by_name:
        targets = given
    elif s.columns:
        targets = list(s.columns)
    else:  # by position: as many columns as the table has, as delta-spark asks
        targets = [f.name for f in table.schema.fields]
    if len(targets) != len(given):
        raise SchemaMismatchError(table.path, [f"the query gives {len(given)} columns and the INSERT writes "
                                               f"{len(targets)}: {targets}"],
                                  "name the columns the query gives: INSERT INTO t (a, b) ...")
    unknown = [t for t in targets if t.lower() not in fields]
    if unknown:
        raise SchemaMismatchError(table.path, [f"the table has no column {t!r}" for t in unknown])
    return targets


def _refuse_dynamic_overwrite(lake: "LakeAccess", s: Insert, table: Table) -> None:
    """Replacing the whole table where the session asks for the written partitions only would
    lose rows: refused rather than guessed."""
    if s.replace_where is not None or not table.partition_by:
        return
    mode = str(lake.spark.conf.get("spark.sql.sources.partitionOverwriteMode", "static")).lower()
    if mode == "dynamic":
        raise UnsupportedStatementError(
            s.text, "INSERT OVERWRITE with spark.sql.sources.partitionOverwriteMode=dynamic is not supported",
            fix="name the partitions: INSERT INTO t REPLACE WHERE <partition condition> SELECT ...")


def merge(lake: "LakeAccess", s: Merge) -> "DataFrame":
    """MERGE INTO target USING source ON ... WHEN ...: the builder's MERGE, clause by clause."""
    table = open_table(lake, s.table)
    source = _source(lake, s)
    builder: Any = table.merge(source, s.on, source_alias=s.source_alias, target_alias=s.target_alias)
    for c in s.clauses:
        values = dict(c.values) if c.values is not None else None
        if c.kind == "matched":
            if c.action == "delete":
                builder = builder.when_matched_delete(c.condition)
            elif values is None:
                builder = builder.when_matched_update_all(c.condition)
            else:
                builder = builder.when_matched_update(c.condition, set=values)
        elif c.kind == "not_matched":
            builder = (builder.when_not_matched_insert_all(c.condition) if values is None
                       else builder.when_not_matched_insert(c.condition, values=values))
        elif c.action == "delete":
            builder = builder.when_not_matched_by_source_delete(c.condition)
        else:
            if values is None:
                raise SqlStatementError(s.text, "WHEN NOT MATCHED BY SOURCE cannot UPDATE SET *: the source has no row")
            builder = builder.when_not_matched_by_source_update(c.condition, set=values)
    result = builder.execute()
    return results.frame(lake.spark, results.MERGE, [(result.num_affected_rows, result.num_target_rows_updated,
                                                      result.num_target_rows_deleted,
                                                      result.num_target_rows_inserted)])


def _source(lake: "LakeAccess", s: Merge) -> "DataFrame":
    """The source's rows: a query's, a path table's, or a lake table's or Spark view's by name
    (through lake.sql, which prunes a lake table's reads)."""
    if s.source_is_query:
        return lake.sql(s.source)
    name = s.source_table
    assert name is not None
    if name.path is not None:
        return open_table(lake, name).read()
    return lake.sql(f"SELECT * FROM {name}")
