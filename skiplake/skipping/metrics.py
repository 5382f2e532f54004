"""Three-valued evaluation of a predicate over what the log knows of one file or partition.

Each evaluation returns the set of outcomes the predicate *may* take on some row: a subset of
{True, False, None} (None is SQL NULL). A file can be skipped exactly when True is not in that
set. Tracking False and NULL too is what makes NOT correct: NOT(x < 5) may be true unless every
row is known to satisfy x < 5, which a min/max range proves only when max < 5.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, Mapping

from skiplake.expr.tree import And, Cmp, Const, InList, IsNull, Node, Not, Opaque, Or, StartsWith
from skiplake.expr.visitor import BooleanVisitor, visit
from skiplake.log.schema import Schema, is_primitive
from skiplake.log.values import parse_partition_value
from skiplake.skipping.bounds import compare, file_bounds, in_list, is_no_bound, null_facts, starts_with, stat_value

Outcomes = frozenset
ALL: Outcomes = frozenset({True, False, None})
NONE: Outcomes = frozenset()
T, F, N = True, False, None



@dataclass(frozen=True)
class ColumnRange:
    """What is known of one column's values in a file: bounds, nulls, and whether bounds are exact."""
    min: Any = None           # lower bound of the non-null values, None if unknown
    max: Any = None           # upper bound of the non-null values, None if unknown
    may_null: bool = True     # some value may be NULL
    all_null: bool = False    # every value is NULL (or there are no rows)
    exact: bool = False       # min and max are actual values, not widened bounds


UNKNOWN = ColumnRange()


def exact_value(value: Any) -> ColumnRange:
    """The range of a column whose every value in the file is `value` (a partition value; None: all NULL)."""
    if value is None:
        return ColumnRange(None, None, True, True, True)
    return ColumnRange(value, value, False, False, True)


Lookup = Callable[[str], ColumnRange]


class _RangeEvaluator(BooleanVisitor[Outcomes]):
    """The outcomes a predicate may take on some row of a file whose columns `lookup` describes."""

    def __init__(self, lookup: Lookup) -> None:
        self.lookup = lookup

    def visit_const(self, node: Const) -> Outcomes:
        return frozenset({node.value})

    def visit_opaque(self, node: Opaque) -> Outcomes:
        return ALL

    def visit_and(self, node: And, children: list[Outcomes]) -> Outcomes:
        acc: Outcomes = frozenset({T})
        for child in children:
            acc = _and(acc, child)
        return acc

    def visit_or(self, node: Or, children: list[Outcomes]) -> Outcomes:
        acc: Outcomes = frozenset({F})
        for child in children:
            acc = _or(acc, child)
        return acc

    def visit_not(self, node: Not, child: Outcomes) -> Outcomes:
        return frozenset(_not(v) for v in child)

    def visit_is_null(self, node: IsNull) -> Outcomes:
        rng = self.lookup(node.col.name)
        if rng.all_null:
            return frozenset({T})
        return frozenset({T, F}) if rng.may_null else frozenset({F})

    def visit_cmp(self, node: Cmp) -> Outcomes:
        return self._leaf(node, lambda rng: _compare(node.op, rng, node.value), null_safe=node.op == "<=>")

    def visit_in(self, node: InList) -> Outcomes:
        return self._leaf(node, lambda rng: _in_list(rng, node))

    def visit_starts_with(self, node: StartsWith) -> Outcomes:
        return self._leaf(node, lambda rng: _starts_with(rng, node.prefix))

    def _leaf(self, node: Cmp | InList | StartsWith, outcomes: Callable[[ColumnRange], Outcomes],
              null_safe: bool = False) -> Outcomes:
        """The leaf's outcomes on the non-null values, then what NULLs add (FALSE for <=>, else NULL)."""
        rng = self.lookup(node.col.name)
        if rng.all_null:
            return frozenset({F}) if null_safe else frozenset({N})
        try:
            base = outcomes(rng)
        except TypeError:  # a value that does not compare with the literal: assume anything
            base = frozenset({T, F})
        if rng.may_null:
            return base | {F if null_safe else N}
        return base


def evaluate(node: Node, lookup: Lookup) -> Outcomes:
    """The set of outcomes `node` may take on some row of the file `lookup` describes."""
    return visit(node, _RangeEvaluator(lookup))


def may_match(node: Node, lookup: Lookup) -> bool:
    """Whether `node` may be TRUE on some row of the file `lookup` describes (False: the file can be skipped)."""
    return T in evaluate(node, lookup)


def _not(v: bool | None) -> bool | None:
    return None if v is None else not v


def _and(a: Outcomes, b: Outcomes) -> Outcomes:
    out = set()
    for x in a:
        for y in b:
            if x is F or y is F:
                out.add(F)
            elif x is N or y is N:
                out.add(N)
            else:
                out.add(T)
    return frozenset(out)


def _or(a: Outcomes, b: Outcomes) -> Outcomes:
    out = set()
    for x in a:
        for y in b:
            if x is T or y is T:
                out.add(T)
            elif x is N or y is N:
                out.add(N)
            else:
                out.add(F)
    return frozenset(out)


def _compare(op: str, r: ColumnRange, v: Any) -> Outcomes:
    return _outcomes(*compare(op, r.min, r.max, r.exact, v))


def _in_list(r: ColumnRange, node: InList) -> Outcomes:
    can_t, can_f = in_list(r.min, r.max, r.exact, node.values)
    return frozenset(x for x, ok in ((T, can_t), (N if node.has_null else F, can_f)) if ok)


def _starts_with(r: ColumnRange, prefix: str) -> Outcomes:
    return _outcomes(*starts_with(r.min, r.max, prefix))


def _outcomes(can_t: bool, can_f: bool) -> Outcomes:
    return frozenset(x for x, ok in ((T, can_t), (F, can_f)) if ok)


# ------------------------------------------------------------------ lookups over the log


def partition_lookup(schema: Schema, partition_values: Mapping[str, str | None]) -> Lookup:
    """Exact values for partition columns; every other column unknown."""
    lowered = {k.lower(): v for k, v in partition_values.items()}

    def lookup(name: str) -> ColumnRange:
        key = name.lower()
        if key not in lowered:
            return UNKNOWN
        value = parse_partition_value(lowered[key], schema.field(name).type)
        if is_no_bound(value):
            return ColumnRange(None, None, False, False, False)
        return exact_value(value)
    return lookup


def file_lookup(schema: Schema, partition_values: Mapping[str, str | None], stats: str | dict | None) -> Lookup:
    """Partition columns exactly, data columns from the file's min/max/nullCount stats."""
    parts = partition_lookup(schema, partition_values)
    lowered_parts = {k.lower() for k in partition_values}
    # Decimals keep their precision: a float would round a large decimal's bounds past its value.
    parsed: dict[str, Any] = (json.loads(stats, parse_float=Decimal) if isinstance(stats, str) else stats) or {}
    num_records = parsed.get("numRecords")
    mins, maxs, nulls = parsed.get("minValues") or {}, parsed.get("maxValues") or {}, parsed.get("nullCount") or {}

    def lookup(name: str) -> ColumnRange:
        if name.lower() in lowered_parts:
            return parts(name)
        if num_records == 0:
            return ColumnRange(None, None, True, True, True)
        field = schema.field(name)
        if not is_primitive(field.type):
            return UNKNOWN
        lo, hi, exact = file_bounds(field, stat_value(mins.get(name), field.type),
                                    stat_value(maxs.get(name), field.type))
        return ColumnRange(lo, hi, *null_facts(nulls.get(name), num_records), exact)
    return lookup
