"""One statement, or a script of them, run on a lake: each record goes to the function of its kind."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from skiplake.errors import SqlScriptError, SqlStatementError
from skiplake.statements import ddl_statements as ddl
from skiplake.statements import dml_statements as dml
from skiplake.statements import maintenance_statements as maintenance
from skiplake.statements.names import exists
from skiplake.statements.records import (
    AlterTable,
    ConvertToDelta,
    CreateTable,
    Delete,
    DescribeDetail,
    DescribeHistory,
    DropTable,
    Insert,
    Merge,
    Optimize,
    Query,
    Restore,
    ShowProperties,
    Statement,
    TableName,
    Update,
    Vacuum,
)
from skiplake.statements.statement_parser import parse_statement
from skiplake.statements.tokens import split_script

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from skiplake.statements.lake_access import LakeAccess

Runner = Callable[["LakeAccess", Statement], "DataFrame"]

RUNNERS: dict[type, Callable[..., "DataFrame"]] = {
    CreateTable: ddl.create_table, AlterTable: ddl.alter_table, DropTable: ddl.drop_table,
    Insert: dml.insert, Update: dml.update, Delete: dml.delete, Merge: dml.merge,
    Optimize: maintenance.optimize, Vacuum: maintenance.vacuum, Restore: maintenance.restore,
    DescribeHistory: maintenance.describe_history, DescribeDetail: maintenance.describe_detail,
    ShowProperties: maintenance.show_properties, ConvertToDelta: maintenance.convert,
}


def one_statement(text: str) -> str:
    """The statement of `text` (a trailing `;` allowed); SqlStatementError if it holds more."""
    parts = split_script(text)
    if len(parts) > 1:
        raise SqlStatementError(text, f"lake.sql runs one statement and this text holds {len(parts)}",
                                parts[1].offset, fix="run several with lake.sql_script(text)")
    if not parts:
        raise SqlStatementError(text, "there is no statement (only blanks or comments)")
    return parts[0].text


def statement_of(text: str) -> Statement:
    """The record of the one statement of `text`."""
    return parse_statement(one_statement(text))


def run_statement(lake: "LakeAccess", statement: Statement) -> "DataFrame":
    """Run a statement that is not a query; its result as delta-spark gives it."""
    return RUNNERS[type(statement)](lake, statement)


def spark_owns(lake: "LakeAccess", statement: Statement) -> bool:
    """Whether a statement that writes or alters a table names one of Spark's session catalog
    rather than the lake's (`INSERT INTO a_hive_table ...`): Spark runs it as it always did."""
    if isinstance(statement, (Query, CreateTable, ConvertToDelta)):
        return False
    name: TableName | None = getattr(statement, "table", None)
    if name is None or name.path is not None or name.name is None or exists(lake, name):
        return False
    qualified = f"{name.database}.{name.name}" if name.database else name.name
    return bool(lake.spark.catalog.tableExists(qualified))


def run_script(lake: "LakeAccess", script: str) -> list["DataFrame"]:
    """Every statement of `script` in order, each committed before the next runs; the first that
    fails stops the script with SqlScriptError (statement number, line and text)."""
    out: list["DataFrame"] = []
    for part in split_script(script):
        try:
            out.append(lake.sql(part.text))
        except Exception as e:
            raise SqlScriptError(part.number, part.text, e, part.line) from e
    return out


__all__ = ["Query", "run_script", "run_statement", "spark_owns", "statement_of"]
