"""CREATE [OR REPLACE] TABLE, ALTER TABLE and DROP TABLE, through the Table facade."""
from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from skiplake.errors import EntityNotFoundError, NotATableError, SqlStatementError, UnsupportedStatementError
from skiplake.log.location import is_remote, join, resolve
from skiplake.log.storage_for import storage_at
from skiplake.statements import results
from skiplake.statements.names import exists, find_folder, open_table
from skiplake.statements.records import AlterTable, ColumnSpec, CreateTable, DropTable, TableName
from skiplake.table import Table
from skiplake.txn.identity import IdentityColumn

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from skiplake.statements.lake_access import LakeAccess


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def column_ddl(c: ColumnSpec) -> str:
    """One column as Spark's DDL writes it."""
    text = f"{_quote(c.name)} {c.type}"
    if c.collation:
        text += f" COLLATE {c.collation}"
    if not c.nullable:
        text += " NOT NULL"
    if c.comment is not None:
        text += " COMMENT '" + c.comment.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return text


def _location(lake: "LakeAccess", s: CreateTable) -> tuple[str, str | None]:
    """Where the new table goes, and the name its metadata gets."""
    if s.table.path is not None:
        return s.table.path, None
    name = s.table.name or ""
    if s.table.database is None and lake.root is not None:
        under = lake.path_of(name)
        if s.location is not None and resolve(s.location) != resolve(under):
            if lake.catalog is None:
                raise UnsupportedStatementError(
                    s.text, f"this lake keeps its tables under its root, so table {name!r} cannot be at "
                    f"LOCATION {s.location!r}", fix="create it as delta.`location`, or give the Lake a catalog")
            return s.location, name
        return under, name
    if s.location is None:
        raise SqlStatementError(s.text, f"table {s.table} of the catalog needs a LOCATION")
    return s.location, name


def create_table(lake: "LakeAccess", s: CreateTable) -> "DataFrame":
    """CREATE TABLE / CREATE OR REPLACE TABLE / REPLACE TABLE [AS SELECT]."""
    spark = lake.spark
    present = exists(lake, s.table)
    if present and s.if_not_exists:
        return results.empty(spark)
    if not present and s.or_replace_only:
        raise NotATableError(str(s.table), "REPLACE TABLE replaces a table that exists; use CREATE OR REPLACE TABLE")
    source = lake.sql(s.as_select) if s.as_select is not None else None
    columns = list(s.columns)
    schema: "StructType | str" = (source.schema if source is not None and not columns
                                  else ", ".join(column_ddl(c) for c in columns))
    generated, identity = _column_rules(columns)
    properties = dict(s.properties)
    if present and s.replace:
        table = open_table(lake, s.table)
        operation = "CREATE OR REPLACE TABLE" + (" AS SELECT" if source is not None else "")
        table.replace(schema, list(s.partition_by), s.bucket_by, properties, s.comment, generated, identity,
                      list(s.cluster_by) or None, source, operation=operation)
        return results.empty(spark)
    path, name = _location(lake, s)
    table = Table.create(spark, path, schema, list(s.partition_by) or None, s.bucket_by, properties, name=name,
                         description=s.comment, generated_columns=generated, identity_columns=identity,
                         cluster_by=list(s.cluster_by) or None)
    if s.table.path is None and (lake.root is None or path != lake.path_of(name or "")):
        _register(lake, s.table, path)
    if source is not None:
        table.append(source)
    return results.empty(spark)


def _column_rules(columns: list[ColumnSpec]) -> tuple[dict[str, str], dict[str, IdentityColumn]]:
    """The generated and the identity columns of a CREATE TABLE."""
    generated = {c.name: c.generated for c in columns if c.generated}
    identity = {c.name: IdentityColumn(c.identity[0], c.identity[1], not c.identity[2])
                for c in columns if c.identity is not None}
    return generated, identity


def _register(lake: "LakeAccess", name: TableName, path: str) -> None:
    """Record a named table that is not under the lake's root in the lake's catalog."""
    if lake.catalog is None or name.name is None:
        return
    lake.catalog.call("CreateTable", {
        "DatabaseName": name.database or lake.database,
        "TableInput": {"Name": name.name, "TableType": "EXTERNAL_TABLE",
                       "Parameters": {"table_type": "DELTA", "spark.sql.sources.provider": "delta"},
                       "StorageDescriptor": {"Location": resolve(path)}}})


def alter_table(lake: "LakeAccess", s: AlterTable) -> "DataFrame":
    """ALTER TABLE: one action."""
    table = open_table(lake, s.table)
    action = s.action
    if action == "add_columns":
        table.add_columns(", ".join(column_ddl(c) for c in s.columns))
    elif action == "rename_column":
        table.rename_column(s.names[0], s.names[1])
    elif action == "drop_columns":
        table.drop_columns(*s.names)
    elif action == "set_properties":
        table.set_properties(dict(s.properties))
    elif action == "unset_properties":
        table.unset_properties(list(s.names), if_exists=s.if_exists)
    elif action == "add_constraint":
        assert s.expression is not None
        table.add_constraint(s.names[0], s.expression)
    elif action == "drop_constraint":
        table.drop_constraint(s.names[0], if_exists=s.if_exists)
    elif action == "cluster_by":
        table.cluster_by(list(s.names) or None)
    else:  # parse makes no other action
        raise UnsupportedStatementError(s.text, f"ALTER TABLE action {action}")
    return results.empty(lake.spark)


def drop_table(lake: "LakeAccess", s: DropTable) -> "DataFrame":
    """DROP TABLE: a table under the lake's root loses its folder (as delta-spark's managed tables
    lose their files); a catalog's table leaves the catalog, and its files stay unless they are
    under the lake's root."""
    name = s.table
    if name.path is not None:
        raise UnsupportedStatementError(s.text, "DROP TABLE drops a named table, not delta.`path`",
                                        fix="delete the folder to drop a table known only by its path")
    assert name.name is not None
    if name.database is None and lake.root is not None:
        folder = find_folder(lake, name.name)
        if folder is not None:
            _delete_folder(join(lake.root, folder))
            return results.empty(lake.spark)
    if lake.catalog is not None and _drop_catalog_table(lake, name):
        return results.empty(lake.spark)
    if s.if_exists:
        return results.empty(lake.spark)
    raise NotATableError(lake.path_of(name.name) if lake.root and not name.database else str(name),
                         "DROP TABLE names no table of the lake (DROP TABLE IF EXISTS allows that)")


def _drop_catalog_table(lake: "LakeAccess", name: TableName) -> bool:
    """Take the table out of the lake's catalog (its files too when under the lake's root);
    False when the catalog has no such table."""
    assert lake.catalog is not None and name.name is not None
    database = name.database or lake.database
    try:
        spec = lake.catalog.call("GetTable", {"DatabaseName": database, "Name": name.name})["Table"]
    except EntityNotFoundError:
        return False
    lake.catalog.call("DeleteTable", {"DatabaseName": database, "Name": name.name})
    location = (spec.get("StorageDescriptor") or {}).get("Location") or ""
    if location and lake.root is not None and resolve(location).startswith(resolve(lake.root).rstrip("/") + "/"):
        _delete_folder(resolve(location))
    return True


def _delete_folder(path: str) -> None:
    """Every object under the table's folder: its log last, so that a drop cut short leaves a
    table (or part of one) rather than files without a log."""
    storage = storage_at(path)
    keys = sorted((o.name for o in storage.walk()), key=lambda k: (k.startswith("_delta_log"), k))
    storage.delete_many(keys)
    if not is_remote(path):
        shutil.rmtree(path, ignore_errors=True)  # the folders left empty
