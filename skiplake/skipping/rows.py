"""A bound predicate evaluated on the rows of an Arrow table, keeping the rows Spark's WHERE keeps.

Dynamic file pruning reads a small build side in the driver instead of through a Spark job
(skiplake.skipping.local_build), so the rows kept here must be exactly the rows Spark's filter
keeps. Only what means the same in Arrow and in Spark is evaluated, with SQL's three-valued logic
(Kleene AND and OR, NOT of NULL is NULL, a row is kept where the predicate is TRUE): comparisons,
IN lists, IS NULL and prefix tests on integer, decimal, string (both compare UTF-8 bytes
unsigned), date and boolean columns. Anything else raises `NotExact` and the caller lets Spark
evaluate the filter: a predicate skiplake keeps opaque, floating-point columns (Spark orders NaN
above every number and takes NaN = NaN as true; Arrow follows IEEE), timestamps (literals read
in the session's time zone), a literal the column's type cannot hold exactly.
"""
from __future__ import annotations

from functools import reduce

import pyarrow as pa
import pyarrow.compute as pc

from skiplake.expr.tree import And, Cmp, Const, InList, IsNull, Node, Not, Opaque, Or, StartsWith
from skiplake.expr.visitor import BooleanVisitor, visit
from skiplake.log.schema import INTEGER_TYPES, is_decimal
from skiplake.skipping.literals import Mismatch, literal_array, literal_scalar
from skiplake.skipping.stats_table import arrow_type

_EXACT_TYPES = frozenset(INTEGER_TYPES) | {"string", "date", "boolean"}
_COMPARE = {"=": pc.equal, "<>": pc.not_equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater,
            ">=": pc.greater_equal}
_NULL = pa.scalar(None, pa.bool_())


class NotExact(Exception):
    """The predicate holds something this evaluator cannot evaluate exactly as Spark does."""


def exact_type(type_: str) -> bool:
    """Whether a column of this Delta type compares in Arrow exactly as in Spark."""
    return type_ in _EXACT_TYPES or is_decimal(type_)


def row_mask(node: Node, table: pa.Table) -> pa.ChunkedArray | pa.Array:
    """Per row of `table` (columns named and typed as the predicate's), TRUE, FALSE or NULL."""
    return visit(node, _RowEvaluator(table))


def keep_rows(node: Node | None, table: pa.Table) -> pa.Table:
    """The rows of `table` on which `node` is TRUE (all of them when there is no predicate)."""
    return table if node is None else table.filter(row_mask(node, table), null_selection_behavior="drop")


class _RowEvaluator(BooleanVisitor["pa.ChunkedArray | pa.Array"]):
    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def column(self, name: str, type_: str) -> pa.ChunkedArray:
        if not exact_type(type_):
            raise NotExact(f"column {name} of type {type_}")
        col = self.table.column(name)
        if col.type != arrow_type(type_):
            raise NotExact(f"column {name} read as {col.type}, not as {type_}")
        return col

    def visit_const(self, node: Const) -> pa.Array:
        return pa.array([node.value] * self.table.num_rows, pa.bool_())

    def visit_opaque(self, node: Opaque) -> pa.Array:
        raise NotExact(f"an opaque predicate: {node.sql}")

    def visit_cmp(self, node: Cmp) -> pa.ChunkedArray:
        col = self.column(node.col.name, node.col.type)
        value = _scalar(node.value, node.col.type)
        if node.op == "<=>":  # the value is never NULL: NULL <=> v is FALSE
            return pc.fill_null(pc.equal(col, value), False)
        return _COMPARE[node.op](col, value)

    def visit_in(self, node: InList) -> pa.ChunkedArray:
        col = self.column(node.col.name, node.col.type)
        try:
            values = literal_array(node.values, node.col.type)
        except (Mismatch, pa.ArrowException, OverflowError) as e:
            raise NotExact(f"IN list values of {node.col.name}") from e
        # is_in answers FALSE for a NULL row; SQL's IN answers NULL, and NULL for a non-match
        # when the list holds NULL.
        found = pc.is_in(col, value_set=values, skip_nulls=True)
        found = pc.if_else(pc.is_null(col), _NULL, found)
        return pc.if_else(found, True, _NULL) if node.has_null else found

    def visit_is_null(self, node: IsNull) -> pa.ChunkedArray:
        return pc.is_null(self.column(node.col.name, node.col.type))

    def visit_starts_with(self, node: StartsWith) -> pa.ChunkedArray:
        if node.col.type != "string":
            raise NotExact(f"a prefix test on {node.col.type} column {node.col.name}")
        return pc.starts_with(self.column(node.col.name, node.col.type), pattern=node.prefix)

    def visit_and(self, node: And, children: list) -> pa.ChunkedArray | pa.Array:
        return reduce(pc.and_kleene, children)

    def visit_or(self, node: Or, children: list) -> pa.ChunkedArray | pa.Array:
        return reduce(pc.or_kleene, children)

    def visit_not(self, node: Not, child: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
        return pc.invert(child)


def _scalar(value: object, type_: str) -> pa.Scalar:
    try:
        return literal_scalar(value, type_)
    except (Mismatch, pa.ArrowException, OverflowError) as e:
        raise NotExact(f"the literal {value!r} as {type_}") from e
