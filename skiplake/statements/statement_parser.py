"""A statement's text to its record: skiplake's own grammar first, then sqlglot (as Spark SQL).

Only statements on Delta tables become records; a query, and any statement that is Spark's own
business (temporary views, SET, SHOW TABLES, ...), becomes a `Query`, which lake.sql's planner
runs as before. sqlglot's ParseError never leaves this module: it becomes SqlStatementError with
the position sqlglot gave."""
from __future__ import annotations

from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from skiplake.errors import SqlStatementError, UnsupportedStatementError
from skiplake.layout.bucket_spec import BucketSpec
from skiplake.statements.grammar import parse_own
from skiplake.statements.records import (
    AlterTable,
    ColumnSpec,
    CreateTable,
    Delete,
    DropTable,
    Insert,
    Merge,
    MergeClause,
    Query,
    Statement,
    TableName,
    Update,
)
from skiplake.statements.tokens import Token, tokenize

# Statements that write or describe tables: when sqlglot cannot read one of these, its error is
# the user's; any other text sqlglot cannot read goes to Spark as it is.
_TABLE_STATEMENTS = ("CREATE", "REPLACE", "ALTER", "DROP", "INSERT", "UPDATE", "DELETE", "MERGE")


def parse_statement(text: str) -> Statement:
    """The record of one statement (no `;` inside)."""
    own = parse_own(text)
    if own is not None:
        return own
    tokens = tokenize(text)
    head = tokens[0].text.upper() if tokens and tokens[0].kind == "word" else ""
    if head not in _TABLE_STATEMENTS:
        return Query(text)
    replace_only = head == "REPLACE" and len(tokens) > 1 and tokens[1].is_word("TABLE")
    source = f"CREATE OR {text[tokens[0].start:]}" if replace_only else text
    try:
        tree = sqlglot.parse_one(source, read="spark")
    except (ParseError, TokenError) as e:
        raise SqlStatementError(text, _sqlglot_message(e), _sqlglot_position(text, e)) from None
    return _record(text, tokens, tree, head, replace_only)


def _record(text: str, tokens: list[Token], tree: exp.Expr, head: str, replace_only: bool) -> Statement:
    """The record of a statement sqlglot read."""
    kind = (tree.args.get("kind") or "").upper() if isinstance(tree, (exp.Create, exp.Alter, exp.Drop)) else ""
    if isinstance(tree, exp.Create) and kind == "TABLE":
        return _create(text, tree, replace_only)
    if isinstance(tree, exp.Alter) and kind == "TABLE":
        return _alter(text, tree)
    if isinstance(tree, exp.Drop) and kind == "TABLE":
        return _drop(text, tree)
    makers = {exp.Insert: _insert, exp.Merge: _merge, exp.Update: _update, exp.Delete: _delete}
    for cls, make in makers.items():
        if isinstance(tree, cls):
            return make(text, tokens, tree)
    alter_table = head == "ALTER" and len(tokens) > 1 and tokens[1].is_word("TABLE")
    if isinstance(tree, exp.Command) and (alter_table or head in ("CREATE", "REPLACE")):
        raise UnsupportedStatementError(text, "skiplake does not run this form of the statement",
                                        fix="docs/sql-reference.md lists the statements lake.sql runs")
    return Query(text)  # CREATE VIEW, DROP VIEW, ...: Spark's own


def _drop(text: str, tree: exp.Drop) -> Statement:
    tables = tree.args.get("tables") or [tree.this]
    if len(tables) != 1:
        raise UnsupportedStatementError(text, "DROP TABLE drops one table at a time")
    return DropTable(text, _table_name(tables[0]), bool(tree.args.get("exists")))


def _sqlglot_message(e: Exception) -> str:
    errors = getattr(e, "errors", None) or []
    if errors and errors[0].get("description"):
        highlight = errors[0].get("highlight") or ""
        return f"{errors[0]['description'].rstrip('.')}" + (f" near {highlight!r}" if highlight else "")
    return str(e).splitlines()[0]


def _sqlglot_position(text: str, e: Exception) -> int | None:
    errors = getattr(e, "errors", None) or []
    if not errors or errors[0].get("line") is None:
        return None
    line, col = int(errors[0]["line"]), int(errors[0].get("col") or 1)
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
    offset = starts[min(line, len(starts)) - 1] + max(col - 1, 0)
    highlight = errors[0].get("highlight") or ""
    if highlight:  # sqlglot's column is the end of the token it stopped at
        offset = max(offset - len(highlight) + 1, 0)
    return min(offset, len(text))


def sql_text(node: exp.Expr | None) -> str | None:
    """An expression as Spark SQL text."""
    return None if node is None else node.sql(dialect="spark")


def _table_name(node: exp.Expr) -> TableName:
    if isinstance(node, exp.Schema):
        node = node.this
    if not isinstance(node, exp.Table):
        raise SqlStatementError(node.sql(dialect="spark"), "expected a table name")
    ident = node.this
    db = node.args.get("db")
    if db is not None and db.name.lower() == "delta" and isinstance(ident, exp.Identifier) and ident.quoted:
        return TableName(path=ident.name)
    if node.args.get("catalog") is not None:
        raise UnsupportedStatementError(node.sql(dialect="spark"), "three-part table names are not supported",
                                        fix="name a table of the lake, db.table of its catalog, or delta.`path`")
    return TableName(name=node.name, database=db.name if db is not None else None)


# ------------------------------------------------------------------ DDL


def _literal(node: exp.Expr | None) -> str | None:
    if node is None:
        return None
    return node.name if isinstance(node, exp.Literal) else node.sql(dialect="spark")


def column_spec(text: str, col: exp.ColumnDef) -> ColumnSpec:
    """One column definition of CREATE TABLE or ADD COLUMNS."""
    kind = col.args.get("kind")
    if kind is None:
        raise SqlStatementError(text, f"column {col.name!r} has no type")
    nullable, comment, generated, identity, collation = True, None, None, None, None
    for constraint in col.constraints:
        c = constraint.kind
        if isinstance(c, exp.NotNullColumnConstraint):
            nullable = bool(c.args.get("allow_null"))
        elif isinstance(c, exp.CommentColumnConstraint):
            comment = _literal(c.this)
        elif isinstance(c, exp.CollateColumnConstraint):
            collation = c.this.name if isinstance(c.this, (exp.Column, exp.Identifier, exp.Var)) else _literal(c.this)
        elif isinstance(c, exp.ComputedColumnConstraint):
            generated = sql_text(c.this)
        elif isinstance(c, exp.GeneratedAsIdentityColumnConstraint):
            if c.this is None and c.args.get("expression") is not None:
                generated = sql_text(c.args["expression"])
                continue
            start = int(_literal(c.args.get("start")) or 1)
            step = int(_literal(c.args.get("increment")) or 1)
            identity = (start, step, c.this is False)
        else:
            raise UnsupportedStatementError(text, f"column {col.name!r}: the column constraint "
                                            f"{constraint.sql(dialect='spark')!r} is not supported")
    type_text = kind.sql(dialect="spark")
    return ColumnSpec(col.name, type_text, nullable, comment, generated, identity, collation)


def _create(text: str, tree: exp.Create, replace_only: bool) -> Statement:
    target = tree.this
    columns: tuple[ColumnSpec, ...] = ()
    if isinstance(target, exp.Schema):
        columns = tuple(column_spec(text, c) for c in target.expressions if isinstance(c, exp.ColumnDef))
    table = _table_name(target)
    layout = _Layout(columns)
    props = tree.args.get("properties")
    for p in props.expressions if props is not None else []:
        layout.take(text, p)
    columns = layout.columns
    query = tree.args.get("expression")
    as_select = _query_text(text, query) if query is not None else None
    if not columns and as_select is None:
        raise SqlStatementError(text, "CREATE TABLE needs columns or AS SELECT")
    return CreateTable(text, table, columns, bool(tree.args.get("exists")), bool(tree.args.get("replace")),
                       replace_only, layout.partition_by, layout.cluster_by, layout.bucket_by, layout.location,
                       tuple(layout.properties), layout.comment, as_select)


@dataclass
class _Layout:
    """CREATE TABLE's clauses after the columns, gathered one property at a time."""
    columns: tuple[ColumnSpec, ...]
    partition_by: tuple[str, ...] = ()
    cluster_by: tuple[str, ...] = ()
    bucket_by: BucketSpec | None = None
    location: str | None = None
    comment: str | None = None
    properties: list[tuple[str, str]] = field(default_factory=list)

    def take(self, text: str, p: exp.Expr) -> None:
        """One clause: USING, PARTITIONED BY, CLUSTER BY, CLUSTERED BY, LOCATION, COMMENT, TBLPROPERTIES."""
        if isinstance(p, exp.FileFormatProperty):
            provider = p.this.name if p.this is not None else ""
            if provider.lower() != "delta":
                raise UnsupportedStatementError(
                    text, f"lake.sql creates Delta tables, not tables USING {provider}",
                    fix="write USING DELTA (or no USING clause), or run the statement with spark.sql")
        elif isinstance(p, exp.PartitionedByProperty):
            parts = p.this.expressions if isinstance(p.this, exp.Schema) else [p.this]
            defs = [column_spec(text, x) for x in parts if isinstance(x, exp.ColumnDef)]
            self.columns = self.columns + tuple(defs)
            self.partition_by = tuple(d.name for d in defs) if defs else tuple(x.name for x in parts)
        elif isinstance(p, exp.ClusterProperty):
            self.cluster_by = tuple(x.name for x in p.expressions)
        elif isinstance(p, exp.ClusteredByProperty):
            sort = [o.this.name if isinstance(o, exp.Ordered) else o.name for o in p.args.get("sorted_by") or []]
            self.bucket_by = BucketSpec(num_buckets=int(_literal(p.args["buckets"]) or 0),
                                        columns=[x.name for x in p.expressions], sort_by=sort)
        elif isinstance(p, exp.LocationProperty):
            self.location = _literal(p.this)
        elif isinstance(p, exp.SchemaCommentProperty):
            self.comment = _literal(p.this)
        elif isinstance(p, exp.Property):
            self.properties.append((_literal(p.this) or "", _literal(p.args.get("value")) or ""))
        else:
            raise UnsupportedStatementError(text, f"the table clause {p.sql(dialect='spark')!r} is not supported")


def _query_text(text: str, query: exp.Expr) -> str:
    """The text of the statement's trailing query (AS SELECT ...), as the user wrote it."""
    tokens = tokenize(text)
    for i, t in enumerate(tokens):
        if t.is_word("AS") and i + 1 < len(tokens) and (tokens[i + 1].is_word("SELECT", "WITH", "VALUES", "FROM")
                                                       or tokens[i + 1].text == "("):
            depth = sum((x.text == "(") - (x.text == ")") for x in tokens[:i])
            if depth == 0:
                return text[tokens[i + 1].start:].strip()
    return query.sql(dialect="spark")


def _alter_drop(text: str, table: TableName, a: exp.Drop) -> Statement:
    """ALTER TABLE ... DROP CONSTRAINT | DROP COLUMN(S)."""
    if (a.args.get("kind") or "").upper() == "CONSTRAINT":
        name = a.this.name if a.this else a.args["tables"][0].name
        return AlterTable(text, table, "drop_constraint", names=(name,), if_exists=bool(a.args.get("exists")))
    names: list[str] = []
    for t in a.args.get("tables") or [a.this]:
        names.extend(x.name for x in (t.expressions if isinstance(t, exp.Schema) else [t]))
    return AlterTable(text, table, "drop_columns", names=tuple(names), if_exists=bool(a.args.get("exists")))


def _alter(text: str, tree: exp.Alter) -> Statement:
    table = _table_name(tree.this)
    actions = tree.args.get("actions") or []
    if len(actions) != 1:
        raise UnsupportedStatementError(text, "ALTER TABLE with more than one action")
    a = actions[0]
    if isinstance(a, exp.Schema):
        cols = tuple(column_spec(text, c) for c in a.expressions if isinstance(c, exp.ColumnDef))
        return AlterTable(text, table, "add_columns", columns=cols)
    if isinstance(a, exp.ColumnDef):
        return AlterTable(text, table, "add_columns", columns=(column_spec(text, a),))
    if isinstance(a, exp.RenameColumn):
        return AlterTable(text, table, "rename_column", names=(a.this.name, a.args["to"].name))
    if isinstance(a, exp.Drop):
        return _alter_drop(text, table, a)
    if isinstance(a, exp.AlterSet):
        props = [(_literal(p.this) or "", _literal(p.args.get("value")) or "") for group in a.expressions
                 for p in (group.expressions if isinstance(group, exp.Properties) else [group])]
        if props:
            return AlterTable(text, table, "set_properties", properties=tuple(props))
    if isinstance(a, exp.AddConstraint):
        constraint = a.expressions[0]
        checks = [c for c in constraint.expressions if isinstance(c, exp.CheckColumnConstraint)]
        if len(checks) == 1:
            return AlterTable(text, table, "add_constraint", names=(constraint.name,),
                              expression=sql_text(checks[0].this))
        raise UnsupportedStatementError(text, "only CHECK constraints can be added",
                                        fix="Delta enforces CHECK constraints and NOT NULL")
    if isinstance(a, exp.ClusterProperty):
        return AlterTable(text, table, "cluster_by", names=tuple(x.name for x in a.expressions))
    raise UnsupportedStatementError(text, f"ALTER TABLE ... {a.sql(dialect='spark')} is not supported",
                                    fix="docs/sql-reference.md lists the ALTER TABLE forms lake.sql runs")


# ------------------------------------------------------------------ DML


def _depth0(tokens: list[Token], start: int, *words: str) -> int | None:
    """Index of the first token from `start` that is one of `words` outside parentheses."""
    depth = 0
    for i in range(start, len(tokens)):
        t = tokens[i]
        if t.text == "(":
            if depth == 0 and "(" in words:
                return i
            depth += 1
        elif t.text == ")":
            depth -= 1
        elif depth == 0 and t.kind == "word" and t.text.upper() in words:
            return i
    return None


def _insert(text: str, tokens: list[Token], tree: exp.Expr) -> Statement:
    target = tree.this
    columns: tuple[str, ...] = ()
    if isinstance(target, exp.Schema):
        columns = tuple(c.name for c in target.expressions)
    if tree.args.get("partition") not in (None, False):
        raise UnsupportedStatementError(text, "INSERT ... PARTITION (...) is not supported",
                                        fix="select the partition columns' values in the query instead")
    table = _table_name(target)
    where = tree.args.get("where")
    start = _query_start(tokens, bool(columns), where is not None)
    at = _depth0(tokens, start, "SELECT", "VALUES", "WITH", "FROM", "TABLE", "(")
    query = text[tokens[at].start:].strip() if at is not None else sql_text(tree.expression) or ""
    if query.upper().startswith("TABLE "):
        query = "SELECT * FROM " + query[6:]
    return Insert(text, table, query, bool(tree.args.get("overwrite")), columns, sql_text(where),
                  bool(tree.args.get("by_name")))


def _query_start(tokens: list[Token], columns: bool, replace_where: bool) -> int:
    """Where INSERT's query may start: after INSERT INTO|OVERWRITE [TABLE] name [(columns)]
    [REPLACE WHERE cond]."""
    start = 3 + (len(tokens) > 2 and tokens[2].is_word("TABLE"))
    while start + 1 < len(tokens) and tokens[start].text == ".":
        start += 2
    if columns and start < len(tokens) and tokens[start].text == "(":
        start = _closing(tokens, start) + 1
    if replace_where:
        start = (_depth0(tokens, start, "WHERE") or start) + 1
    return start


def _closing(tokens: list[Token], opening: int) -> int:
    """The index of the `)` closing the `(` at `opening` (the last token when none does)."""
    depth = 0
    for i in range(opening, len(tokens)):
        depth += (tokens[i].text == "(") - (tokens[i].text == ")")
        if depth == 0:
            return i
    return len(tokens) - 1


def _alias_of(node: exp.Expr) -> str | None:
    alias = node.args.get("alias")
    return alias.name if alias is not None else None


def _update(text: str, tokens: list[Token], tree: exp.Expr) -> Statement:
    table = _table_name(tree.this)
    alias = _alias_of(tree.this)
    sets: list[tuple[str, str]] = []
    for eq in tree.expressions:
        if not isinstance(eq, exp.EQ) or not isinstance(eq.this, exp.Column):
            raise SqlStatementError(text, f"{eq.sql(dialect='spark')!r} is not an assignment column = value")
        sets.append((eq.this.name, sql_text(eq.expression) or ""))
    if not sets:
        raise SqlStatementError(text, "UPDATE needs SET column = value", len(text))
    where = tree.args.get("where")
    return Update(text, table, tuple(sets), sql_text(where.this) if where is not None else None, alias)


def _delete(text: str, tokens: list[Token], tree: exp.Expr) -> Statement:
    table = _table_name(tree.this)
    where = tree.args.get("where")
    return Delete(text, table, sql_text(where.this) if where is not None else None, _alias_of(tree.this))


def _merge(text: str, tokens: list[Token], tree: exp.Expr) -> Statement:
    table = _table_name(tree.this)
    target_alias = _alias_of(tree.this) or table.label or "target"
    using = tree.args["using"]
    if isinstance(using, exp.Subquery):
        source_alias = _alias_of(using) or "source"
        at = _depth0(tokens, 0, "USING")
        source = sql_text(using.this) or ""
        if at is not None and at + 1 < len(tokens) and tokens[at + 1].text == "(":
            source = text[tokens[at + 1].end:tokens[_closing(tokens, at + 1)].start].strip()
        return Merge(text, table, target_alias, source, True, source_alias, sql_text(tree.args["on"]) or "",
                     _whens(text, tree))
    if not isinstance(using, exp.Table):
        raise UnsupportedStatementError(text, "MERGE's source must be a table, a view or a subquery in parentheses")
    source_table = _table_name(using)
    source_alias = _alias_of(using) or source_table.label or "source"
    return Merge(text, table, target_alias, str(source_table), False, source_alias,
                 sql_text(tree.args["on"]) or "", _whens(text, tree), source_table)


def _whens(text: str, tree: exp.Expr) -> tuple[MergeClause, ...]:
    whens = tree.args.get("whens")
    out = [_when(text, w) for w in (whens.expressions if whens is not None else [])]
    if not out:
        raise SqlStatementError(text, "MERGE needs at least one WHEN clause")
    # Spark's grammar takes the clauses in this order (the builder's API takes any).
    order = ["matched", "not_matched", "not_matched_by_source"]
    ranks = [order.index(c.kind) for c in out]
    if ranks != sorted(ranks):
        raise SqlStatementError(text, "MERGE's WHEN clauses must come in the order WHEN MATCHED, WHEN NOT MATCHED, "
                                "WHEN NOT MATCHED BY SOURCE", fix="reorder the clauses (each kind keeps its order)")
    return tuple(out)


def _insert_values(text: str, then: exp.Insert) -> tuple[tuple[str, str], ...] | None:
    """INSERT (columns) VALUES (values) as pairs; None for INSERT *."""
    if isinstance(then.this, exp.Star) or then.this is None:
        return None
    names = [c.name for c in then.this.expressions]
    exprs = [sql_text(v) or "" for v in then.expression.expressions]
    if len(names) != len(exprs):
        raise SqlStatementError(text, f"INSERT names {len(names)} columns and gives {len(exprs)} values")
    return tuple(zip(names, exprs))


def _when(text: str, w: exp.Expr) -> MergeClause:
    """One WHEN [NOT] MATCHED [BY SOURCE | BY TARGET] [AND cond] THEN action."""
    kind = "matched" if w.args.get("matched") else ("not_matched_by_source" if w.args.get("source")
                                                     else "not_matched")
    condition = sql_text(w.args.get("condition"))
    then = w.args.get("then")
    if isinstance(then, exp.Update):
        if len(then.expressions) == 1 and isinstance(then.expressions[0], exp.Star):
            return MergeClause(kind, "update", condition, None)
        values = tuple((eq.this.name, sql_text(eq.expression) or "") for eq in then.expressions)
        return MergeClause(kind, "update", condition, values)
    if isinstance(then, exp.Insert):
        return MergeClause(kind, "insert", condition, _insert_values(text, then))
    if isinstance(then, exp.Var) and then.name.upper() == "DELETE":
        return MergeClause(kind, "delete", condition)
    raise UnsupportedStatementError(text, f"the MERGE action {w.sql(dialect='spark')!r} is not supported")
