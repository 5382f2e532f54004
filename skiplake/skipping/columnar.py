"""Three-valued evaluation of a predicate over all files at once.

The same logic as `metrics.evaluate`, with each outcome set held as three boolean arrays
(`t`, `f`, `n`: the predicate may be TRUE / FALSE / NULL on some row of file i). A file can be
skipped where `t` is False. Leaves compare Arrow arrays of bounds with a literal; an IN list is
matched against bounds by binary search, so 10,000 values cost about as much as one.

A leaf whose literal does not line up with the column's Arrow type (5.5 against an integer
column, a value outside the type's range) is evaluated file by file with the scalar evaluator:
rare, and always right.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import InvalidOperation
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skiplake.expr.tree import And, Cmp, Const, InList, IsNull, Node, Not, Opaque, Or, StartsWith
from skiplake.expr.visitor import BooleanVisitor, columns_of, visit
from skiplake.layout.sortable import sortable
from skiplake.skipping.literals import Mismatch, literal_array, literal_scalar
from skiplake.skipping.metrics import ColumnRange, evaluate
from skiplake.skipping.stats_table import ColumnStats, StatsTable


@dataclass(frozen=True)
class Masks:
    t: np.ndarray
    f: np.ndarray
    n: np.ndarray


def may_match_files(node: Node, stats: StatsTable) -> np.ndarray:
    """A boolean array: True where file i may hold a row on which `node` is TRUE."""
    stats.prepare(sorted(columns_of(node)))
    return evaluate_files(node, stats).t


def evaluate_files(node: Node, stats: StatsTable) -> Masks:
    return visit(node, _ColumnarEvaluator(stats))


class _ColumnarEvaluator(BooleanVisitor[Masks]):
    """`metrics._RangeEvaluator`'s rules, with each outcome set held as three arrays over files."""

    def __init__(self, stats: StatsTable) -> None:
        self.stats = stats
        self.size = stats.num_files

    def visit_const(self, node: Const) -> Masks:
        return _const(node.value, self.size)

    def visit_opaque(self, node: Opaque) -> Masks:
        ones = np.ones(self.size, dtype=bool)
        return Masks(ones, ones.copy(), ones.copy())

    def visit_and(self, node: And, children: list[Masks]) -> Masks:
        acc = _const(True, self.size)
        for child in children:
            acc = _and(acc, child)
        return acc

    def visit_or(self, node: Or, children: list[Masks]) -> Masks:
        acc = _const(False, self.size)
        for child in children:
            acc = _or(acc, child)
        return acc

    def visit_not(self, node: Not, child: Masks) -> Masks:
        return Masks(child.f, child.t, child.n)

    def visit_cmp(self, node: Cmp) -> Masks:
        return self._leaf(node)

    def visit_in(self, node: InList) -> Masks:
        return self._leaf(node)

    def visit_is_null(self, node: IsNull) -> Masks:
        return self._leaf(node)

    def visit_starts_with(self, node: StartsWith) -> Masks:
        return self._leaf(node)

    def _leaf(self, node: Cmp | InList | IsNull | StartsWith) -> Masks:
        col = self.stats.column(node.col.name)
        try:
            masks = _leaf(node, col)
        except (Mismatch, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError,
                InvalidOperation):
            return _leaf_by_file(node, col)
        return _with_all_null(node, col, masks)


def _with_all_null(node: Node, col: ColumnStats, masks: Masks) -> Masks:
    """Files whose column is entirely NULL: only IS NULL is true, <=> is false, the rest NULL."""
    a = col.all_null
    if not a.any():
        return masks
    size = len(a)
    if isinstance(node, IsNull):
        t, f, n = np.ones(size, bool), np.zeros(size, bool), np.zeros(size, bool)
    elif isinstance(node, Cmp) and node.op == "<=>":
        t, f, n = np.zeros(size, bool), np.ones(size, bool), np.zeros(size, bool)
    else:
        t, f, n = np.zeros(size, bool), np.zeros(size, bool), np.ones(size, bool)
    return Masks(np.where(a, t, masks.t), np.where(a, f, masks.f), np.where(a, n, masks.n))


def _const(value: bool | None, size: int) -> Masks:
    return Masks(np.full(size, value is True), np.full(size, value is False), np.full(size, value is None))


def _and(a: Masks, b: Masks) -> Masks:
    return Masks(a.t & b.t, a.f | b.f, (a.n & (b.t | b.n)) | (b.n & (a.t | a.n)))


def _or(a: Masks, b: Masks) -> Masks:
    return Masks(a.t | b.t, a.f & b.f, (a.n & (b.f | b.n)) | (b.n & (a.f | a.n)))


# ------------------------------------------------------------------ leaves


def _np(mask: pa.Array | pa.ChunkedArray, fill: bool) -> np.ndarray:
    return np.asarray(pc.fill_null(mask, fill), dtype=bool)


def _leaf(node: Node, col: ColumnStats) -> Masks:
    if isinstance(node, IsNull):
        return Masks(col.may_null | col.all_null, ~col.all_null, np.zeros(len(col.min), bool))
    if isinstance(node, Cmp):
        return _cmp_leaf(node, col)
    if isinstance(node, InList):
        return _in_leaf(node, col)
    if isinstance(node, StartsWith):
        return _starts_with_leaf(node, col)
    raise Mismatch


def _cmp_leaf(node: Cmp, col: ColumnStats) -> Masks:
    lo, hi = col.min, col.max
    v = literal_scalar(node.value, col.type)
    op = node.op
    # "lo is unknown or lo <= v" is a comparison whose NULL is filled with True.
    if op in ("=", "<=>", "<>"):
        inside = _np(pc.less_equal(lo, v), True) & _np(pc.less_equal(v, hi), True)
        single = col.exact & _np(pc.equal(lo, v), False) & _np(pc.equal(hi, v), False)
        can_t, can_f = (inside, ~single) if op != "<>" else (~single, inside)
    elif op in _RANGE_TESTS:
        true_if, false_if = _RANGE_TESTS[op]
        can_t, can_f = true_if(lo, hi, v), false_if(lo, hi, v)
    else:
        raise Mismatch
    if op == "<=>":
        return Masks(can_t, can_f | col.may_null, np.zeros(len(lo), bool))
    return Masks(can_t, can_f, col.may_null.copy())


# For x < v etc.: (whether some value in [lo, hi] makes it TRUE, whether some makes it FALSE);
# an unknown bound answers "maybe".
_RANGE_TESTS: dict[str, tuple[Any, Any]] = {
    "<": (lambda lo, hi, v: _np(pc.less(lo, v), True), lambda lo, hi, v: _np(pc.greater_equal(hi, v), True)),
    "<=": (lambda lo, hi, v: _np(pc.less_equal(lo, v), True), lambda lo, hi, v: _np(pc.greater(hi, v), True)),
    ">": (lambda lo, hi, v: _np(pc.greater(hi, v), True), lambda lo, hi, v: _np(pc.less_equal(lo, v), True)),
    ">=": (lambda lo, hi, v: _np(pc.greater_equal(hi, v), True), lambda lo, hi, v: _np(pc.less(lo, v), True)),
}


def _in_leaf(node: InList, col: ColumnStats) -> Masks:
    lo, hi = col.min, col.max
    value_set = literal_array(node.values, col.type) if node.values else pa.array([], lo.type)
    can_t = _any_inside(lo, hi, value_set)
    single = col.exact & _np(pc.equal(lo, hi), False) & _np(pc.is_in(lo, value_set=value_set), False)
    if node.has_null:
        return Masks(can_t, np.zeros(len(lo), bool), ~single | col.may_null)
    return Masks(can_t, ~single, col.may_null.copy())


def _starts_with_leaf(node: StartsWith, col: ColumnStats) -> Masks:
    if col.type != "string":
        raise Mismatch
    lo, hi, prefix = col.min, col.max, node.prefix
    head = pc.utf8_slice_codeunits(lo, 0, len(prefix))
    can_t = _np(pc.greater_equal(hi, prefix), True) & _np(pc.less_equal(head, prefix), True)
    both = _np(pc.starts_with(lo, prefix), False) & _np(pc.starts_with(hi, prefix), False)
    return Masks(can_t, ~both, col.may_null.copy())


def _any_inside(lo: pa.Array, hi: pa.Array, values: pa.Array) -> np.ndarray:
    """For each file, whether some value v has lo <= v <= hi (unknown bounds are open)."""
    size = len(lo)
    if not len(values):
        return np.zeros(size, bool)
    if len(values) <= 4:
        out = np.zeros(size, bool)
        for v in values:
            out |= _np(pc.less_equal(lo, v), True) & _np(pc.less_equal(v, hi), True)
        return out
    keys = sortable(values.take(pc.sort_indices(values)))
    lo_keys, hi_keys = sortable(lo), sortable(hi)
    lo_known, hi_known = np.asarray(lo.is_valid()), np.asarray(hi.is_valid())
    # The first value >= lo (or the smallest value when lo is unknown) must be <= hi.
    start = np.where(lo_known, np.searchsorted(keys, np.where(lo_known, lo_keys, keys[0]), side="left"), 0)
    found = start < len(keys)
    candidate = keys[np.minimum(start, len(keys) - 1)]
    within = np.where(hi_known, candidate <= np.where(hi_known, hi_keys, candidate), True)
    return found & within


def _leaf_by_file(node: Node, col: ColumnStats) -> Masks:
    los, his = col.min.to_pylist(), col.max.to_pylist()
    size = len(los)
    t, f, n = np.zeros(size, bool), np.zeros(size, bool), np.zeros(size, bool)
    for i in range(size):
        rng = ColumnRange(los[i], his[i], bool(col.may_null[i]), bool(col.all_null[i]), bool(col.exact[i]))
        out = evaluate(node, lambda _name, r=rng: r)
        t[i], f[i], n[i] = True in out, False in out, None in out
    return Masks(t, f, n)
