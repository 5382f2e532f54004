"""Delta's SQL statements as plain records: what `parse` makes of a statement's text and the
runners act on. Expressions stay Spark SQL text (conditions, assignments, queries), as the
Table facade takes them."""
from __future__ import annotations

from dataclasses import dataclass, field

from skiplake.layout.bucket_spec import BucketSpec


@dataclass(frozen=True)
class TableName:
    """A table as a statement names it: `name` (with `database` when qualified) or ``delta.`path` ``."""
    name: str | None = None
    database: str | None = None
    path: str | None = None

    def __str__(self) -> str:
        """The name as SQL writes it."""
        if self.path is not None:
            return f"delta.`{self.path}`"
        return f"{self.database}.{self.name}" if self.database else str(self.name)

    @property
    def label(self) -> str:
        """How a condition may qualify the table's columns when the statement gives no alias."""
        return self.name or ""


@dataclass(frozen=True)
class Statement:
    """Any statement; `text` as given."""
    text: str


@dataclass(frozen=True)
class Query(Statement):
    """A query, run by lake.sql's planner."""


# ------------------------------------------------------------------ DDL


@dataclass(frozen=True)
class ColumnSpec:
    """One column of CREATE TABLE or ALTER TABLE ADD COLUMNS."""
    name: str
    type: str                          # Spark SQL type, e.g. "DECIMAL(7,2)", "STRING COLLATE UTF8_LCASE"
    nullable: bool = True
    comment: str | None = None
    generated: str | None = None       # GENERATED ALWAYS AS (expression)
    identity: tuple[int, int, bool] | None = None   # (start, step, allow explicit values: BY DEFAULT)
    collation: str | None = None       # e.g. UTF8_LCASE


@dataclass(frozen=True)
class CreateTable(Statement):
    """CREATE [OR REPLACE] TABLE | REPLACE TABLE, with columns and/or AS SELECT."""
    table: TableName
    columns: tuple[ColumnSpec, ...] = ()
    if_not_exists: bool = False
    replace: bool = False
    or_replace_only: bool = False       # REPLACE TABLE: the table must exist
    partition_by: tuple[str, ...] = ()
    cluster_by: tuple[str, ...] = ()
    bucket_by: BucketSpec | None = None
    location: str | None = None
    properties: tuple[tuple[str, str], ...] = ()
    comment: str | None = None
    as_select: str | None = None


@dataclass(frozen=True)
class AlterTable(Statement):
    """ALTER TABLE: `action` is one of add_columns, rename_column, drop_columns, set_properties,
    unset_properties, add_constraint, drop_constraint, cluster_by; `args` its arguments."""
    table: TableName
    action: str
    columns: tuple[ColumnSpec, ...] = ()
    names: tuple[str, ...] = ()
    properties: tuple[tuple[str, str], ...] = ()
    if_exists: bool = False
    expression: str | None = None


@dataclass(frozen=True)
class DropTable(Statement):
    """DROP TABLE [IF EXISTS]."""
    table: TableName
    if_exists: bool = False


# ------------------------------------------------------------------ DML


@dataclass(frozen=True)
class Insert(Statement):
    """INSERT INTO | OVERWRITE [(columns)] [REPLACE WHERE cond] [BY NAME] query."""
    table: TableName
    query: str                          # SELECT ... or VALUES ...
    overwrite: bool = False
    columns: tuple[str, ...] = ()
    replace_where: str | None = None
    by_name: bool = False


@dataclass(frozen=True)
class Update(Statement):
    """UPDATE table [alias] SET ... [WHERE ...]."""
    table: TableName
    assignments: tuple[tuple[str, str], ...]
    where: str | None = None
    alias: str | None = None


@dataclass(frozen=True)
class Delete(Statement):
    """DELETE FROM table [alias] [WHERE ...]."""
    table: TableName
    where: str | None = None
    alias: str | None = None


@dataclass(frozen=True)
class MergeClause:
    """One WHEN clause: kind matched | not_matched | not_matched_by_source; action update | delete |
    insert; `values` None for `*` (UPDATE SET *, INSERT *)."""
    kind: str
    action: str
    condition: str | None = None
    values: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True)
class Merge(Statement):
    """MERGE INTO target USING source ON condition WHEN ... (source: a table's name or a query)."""
    table: TableName
    target_alias: str
    source: str                         # a table's name, or a query's text
    source_is_query: bool
    source_alias: str
    on: str
    clauses: tuple[MergeClause, ...] = field(default_factory=tuple)
    source_table: TableName | None = None


# ------------------------------------------------------------------ maintenance and inspection


@dataclass(frozen=True)
class Optimize(Statement):
    """OPTIMIZE table [WHERE ...] [ZORDER BY (...)] | OPTIMIZE table FULL."""
    table: TableName
    where: str | None = None
    zorder_by: tuple[str, ...] = ()
    full: bool = False


@dataclass(frozen=True)
class Vacuum(Statement):
    """VACUUM table [RETAIN n HOURS] [DRY RUN]."""
    table: TableName
    retain_hours: float | None = None
    dry_run: bool = False


@dataclass(frozen=True)
class Restore(Statement):
    """RESTORE [TABLE] table [TO] VERSION AS OF n | TIMESTAMP AS OF ts."""
    table: TableName
    version: int | None = None
    timestamp: str | None = None        # an expression's text (a string literal's value when one)
    timestamp_is_literal: bool = True


@dataclass(frozen=True)
class DescribeHistory(Statement):
    """DESCRIBE HISTORY table [LIMIT n]."""
    table: TableName
    limit: int | None = None


@dataclass(frozen=True)
class DescribeDetail(Statement):
    """DESCRIBE DETAIL table."""
    table: TableName


@dataclass(frozen=True)
class ShowProperties(Statement):
    """SHOW TBLPROPERTIES table [(key)]."""
    table: TableName
    key: str | None = None


@dataclass(frozen=True)
class ConvertToDelta(Statement):
    """CONVERT TO DELTA parquet.`path` [NO STATISTICS] [PARTITIONED BY (col type, ...)]."""
    path: str
    partition_schema: str | None = None   # "col type, ..." of PARTITIONED BY
    collect_stats: bool = True
