"""Three-valued evaluation of a predicate over all files at once.

The same logic as `metrics.evaluate`, with each outcome set held as three boolean arrays
(`t`, `f`, `n`: the predicate may be TRUE / FALSE / NULL on some row of file i). A file can be
skipped where `t` is False. Leaves compare Arrow arrays of bounds with a literal, by the rules
of bounds.py.

A leaf whose literal does not line up with the column's Arrow type (5.5 against an integer
column, a value outside the type's range) is evaluated file by file with the scalar evaluator:
rare, and always right.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import InvalidOperation

import numpy as np
import pyarrow as pa

from skiplake.expr.tree import And, Cmp, Const, InList, IsNull, Node, Not, Opaque, Or, StartsWith
from skiplake.expr.visitor import BooleanVisitor, columns_of, visit
from skiplake.skipping.bounds import compare_arrays, in_list_arrays, starts_with_arrays
from skiplake.skipping.literals import Mismatch, literal_array, literal_scalar
from skiplake.skipping.metrics import ColumnRange, evaluate
from skiplake.skipping.stats_table import ColumnStats, StatsTable


@dataclass(frozen=True)
class Masks:
    """The outcomes a predicate may take on some row of each file, one boolean per file: `t` TRUE,
    `f` FALSE, `n` NULL."""
    t: np.ndarray
    f: np.ndarray
    n: np.ndarray


def may_match_files(node: Node, stats: StatsTable) -> np.ndarray:
    """A boolean array: True where file i may hold a row on which `node` is TRUE."""
    stats.prepare(sorted(columns_of(node)))
    return evaluate_files(node, stats).t


def evaluate_files(node: Node, stats: StatsTable) -> Masks:
    """The Masks of `node` over every file of `stats`."""
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
    decided = compare_arrays(node.op, col.min, col.max, col.exact, literal_scalar(node.value, col.type))
    if decided is None:
        raise Mismatch
    can_t, can_f = decided
    if node.op == "<=>":
        return Masks(can_t, can_f | col.may_null, np.zeros(len(can_t), bool))
    return Masks(can_t, can_f, col.may_null.copy())


def _in_leaf(node: InList, col: ColumnStats) -> Masks:
    lo = col.min
    value_set = literal_array(node.values, col.type) if node.values else pa.array([], lo.type)
    can_t, can_f = in_list_arrays(lo, col.max, col.exact, value_set)
    if node.has_null:
        return Masks(can_t, np.zeros(len(lo), bool), can_f | col.may_null)
    return Masks(can_t, can_f, col.may_null.copy())


def _starts_with_leaf(node: StartsWith, col: ColumnStats) -> Masks:
    if col.type != "string":
        raise Mismatch
    can_t, can_f = starts_with_arrays(col.min, col.max, node.prefix)
    return Masks(can_t, can_f, col.may_null.copy())


def _leaf_by_file(node: Node, col: ColumnStats) -> Masks:
    los, his = col.min.to_pylist(), col.max.to_pylist()
    size = len(los)
    t, f, n = np.zeros(size, bool), np.zeros(size, bool), np.zeros(size, bool)
    for i in range(size):
        rng = ColumnRange(los[i], his[i], bool(col.may_null[i]), bool(col.all_null[i]), bool(col.exact[i]))

        def lookup(_name: str, r: ColumnRange = rng) -> ColumnRange:
            return r
        out = evaluate(node, lookup)
        t[i], f[i], n[i] = True in out, False in out, None in out
    return Masks(t, f, n)
