"""Filters Spark pushes to the data source (pyspark.sql.datasource's Filter classes) as skiplake's
bound predicate tree, so a read through the data source prunes files as `t.scan` does."""
from __future__ import annotations

from typing import Any, Sequence

from pyspark.sql import datasource as ds

from skiplake.expr.parse import NOT_A_LITERAL, cast_literal
from skiplake.expr.tree import And, Cmp, Col, InList, IsNull, Node, Not, StartsWith
from skiplake.log.schema import Schema

_OPS = {ds.EqualTo: "=", ds.EqualNullSafe: "<=>", ds.GreaterThan: ">", ds.GreaterThanOrEqual: ">=",
        ds.LessThan: "<", ds.LessThanOrEqual: "<="}


def predicate(filters: Sequence[ds.Filter], schema: Schema) -> Node | None:
    """The AND of the filters skiplake can plan with; None when there are none. Filters on nested
    fields or with values of another type are left out (they prune nothing; Spark applies every
    filter to the rows anyway)."""
    nodes = [n for n in (_node(f, schema) for f in filters) if n is not None]
    if not nodes:
        return None
    return nodes[0] if len(nodes) == 1 else And(tuple(nodes))


def _column(attribute: tuple[str, ...], schema: Schema) -> Col | None:
    if len(attribute) != 1:
        return None
    field = next((f for f in schema.fields if f.name.lower() == attribute[0].lower()), None)
    return Col(field.name, field.type) if field is not None else None


def _node(f: ds.Filter, schema: Schema) -> Node | None:
    if isinstance(f, ds.Not):
        inner = _node(f.child, schema)
        return Not(inner) if inner is not None else None
    col = _column(getattr(f, "attribute", ()), schema)
    if col is None:
        return None
    if isinstance(f, ds.IsNull):
        return IsNull(col)
    if isinstance(f, ds.IsNotNull):
        return Not(IsNull(col))
    if isinstance(f, ds.In):
        return _in_list(col, f.value)
    if isinstance(f, ds.StringStartsWith):
        return StartsWith(col, f.value) if col.type == "string" else None
    op = _OPS.get(type(f))
    given = getattr(f, "value", None)
    if op is None or given is None:
        return None
    value = cast_literal(given, col.type)
    return None if value is NOT_A_LITERAL else Cmp(op, col, value)


def _in_list(col: Col, given: tuple[Any, ...]) -> Node | None:
    values = [cast_literal(v, col.type) for v in given if v is not None]
    if any(v is NOT_A_LITERAL for v in values):
        return None
    return InList(col, tuple(values), has_null=any(v is None for v in given))
