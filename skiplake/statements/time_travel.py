"""Before a query is planned: its `name VERSION AS OF n`, `name TIMESTAMP AS OF ts`,
``delta.`path` `` and `table_changes('name', start[, end])` references become plain table names
that the lake resolves to the snapshot (or change feed) they mean. A snapshot is planned and
pruned as any lake table is; a change feed is read as Table.changes reads it."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from skiplake.errors import InvalidArgumentError
from skiplake.log.history import version_at
from skiplake.log.snapshot import Snapshot
from skiplake.statements.names import open_table
from skiplake.statements.records import TableName
from skiplake.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from skiplake.statements.lake_access import LakeAccess


@dataclass
class Rewritten:
    """The query to plan, the snapshots its new names stand for, and the change feeds to register
    as temporary views (dropped once the query is planned)."""
    query: str
    snapshots: dict[str, Snapshot] = field(default_factory=dict)
    views: dict[str, "DataFrame"] = field(default_factory=dict)


def _literal(node: Any, what: str) -> str:
    if isinstance(node, exp.Literal):
        return node.name
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return "-" + node.this.name
    raise InvalidArgumentError(f"{what} must be a literal, not {node.sql(dialect='spark')!r}")


def rewrite(lake: "LakeAccess", query: str) -> Rewritten:
    """The query with its time travel references named; the query itself when it has none."""
    lowered = query.lower()
    if " as of " not in " ".join(lowered.split()) and "table_changes" not in lowered and "delta." not in lowered:
        return Rewritten(query)
    try:
        tree = sqlglot.parse_one(query, read="spark")
    except (ParseError, TokenError):
        return Rewritten(query)
    out = Rewritten(query)
    token = uuid.uuid4().hex[:8]
    for i, table in enumerate(list(tree.find_all(exp.Table))):
        name = f"__skiplake_tt{token}_{i}"
        if _named(lake, table, name, out):
            _rename(table, name)
    if out.snapshots or out.views:
        out.query = tree.sql(dialect="spark")
    return out


def _named(lake: "LakeAccess", table: exp.Table, name: str, out: Rewritten) -> bool:
    """Record what the reference means under `name` when it is one to rename."""
    version = table.args.get("version")
    if isinstance(table.this, exp.Anonymous) and table.this.name.lower() == "table_changes":
        out.views[name] = _changes(lake, table.this)
    elif version is not None:
        target = open_table(lake, _name_of(table))
        at = _literal(version.expression, f"{version.name} AS OF")
        number = int(at) if version.name.upper() == "VERSION" else version_at(target.path, at)
        # As Table.open loads it: past the replay bound, its files stay pending (a Spark job plans them).
        out.snapshots[name] = Table.open(lake.spark, target.path, number).snapshot
    elif _name_of(table).path is not None:
        # The lake's own snapshot of the table, while no commit comes: its parsed stats and views are reused.
        out.snapshots[name] = lake.latest_snapshot(str(_name_of(table).path))
    else:
        return False
    return True


def _rename(table: exp.Table, name: str) -> None:
    """The reference replaced by `name`, keeping its alias (or its own name as one)."""
    alias = table.args.get("alias")
    replacement = exp.Table(this=exp.to_identifier(name))
    if alias is not None:
        replacement.set("alias", alias)
    elif not isinstance(table.this, exp.Anonymous):
        replacement.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
    table.replace(replacement)


def _name_of(table: exp.Table) -> TableName:
    db = table.args.get("db")
    if db is not None and db.name.lower() == "delta" and isinstance(table.this, exp.Identifier) and table.this.quoted:
        return TableName(path=table.this.name)
    return TableName(name=table.name, database=db.name if db is not None else None)


def _changes(lake: "LakeAccess", call: exp.Anonymous) -> "DataFrame":
    """table_changes('name', start[, end]): the change feed, with versions or timestamps."""
    args = call.expressions
    if len(args) not in (2, 3):
        raise InvalidArgumentError("table_changes takes a table name, a start and an optional end")
    target_name = _literal(args[0], "table_changes' table name")
    if target_name.lower().startswith("delta.`") and target_name.endswith("`"):
        target = open_table(lake, TableName(path=target_name[7:-1]))
    else:
        db, _, name = target_name.rpartition(".")
        target = open_table(lake, TableName(name=name, database=db or None))
    bounds: list[int | None] = []
    for arg in args[1:]:
        value = _literal(arg, "table_changes' bounds")
        is_string = isinstance(arg, exp.Literal) and arg.is_string
        bounds.append(version_at(target.path, value) if is_string and not value.lstrip("-").isdigit() else int(value))
    return target.changes(bounds[0], bounds[1] if len(bounds) > 1 else None)
