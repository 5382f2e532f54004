"""Bucket pruning: the set of buckets that may hold rows matching a bound predicate.

A bucket is selected when some row satisfying the predicate could hash into it. Only
predicates that pin every bucket column to a finite set of values narrow the set: `=`, `<=>`,
IN and IS NULL, intersected under AND and united under OR. NOT never narrows it (the
complement of a value set is infinite), nor does anything the tree could not analyse.
Unlike Spark, which prunes single-column specs only, a multi-column spec is pruned when a
conjunction fixes each of its columns: the candidate rows are the cross product of the
per-column value sets (capped at MAX_COMBINATIONS).
"""
from __future__ import annotations

import itertools
import math
from decimal import Decimal
from typing import Any, Sequence

import pyarrow as pa

from skiplake.expr.tree import And, Cmp, Const, InList, IsNull, Node, Not, Opaque, Or, StartsWith, conjuncts
from skiplake.errors import InvalidArgumentError
from skiplake.layout.bucketing import bucket_ids, literal_array
from skiplake.log.schema import INTEGER_TYPES

MAX_COMBINATIONS = 65_536
_NULL = object()  # a NULL of a bucket column (hashes by leaving the seed unchanged)

Buckets = frozenset[int] | None  # None: every bucket


def selected_buckets(node: Node | None, columns: Sequence[str], types: Sequence[Any], num_buckets: int) -> Buckets:
    """The buckets that may hold a row matching `node`, or None when every bucket may."""
    if node is None:
        return None
    return _Pruner(list(columns), list(types), num_buckets).buckets(node)


class _Pruner:
    def __init__(self, columns: list[str], types: list[Any], num_buckets: int) -> None:
        self.columns = columns
        self.lowered = [c.lower() for c in columns]
        self.types = types
        self.n = num_buckets

    def buckets(self, node: Node) -> Buckets:
        if isinstance(node, Const):
            return None if node.value is True else frozenset()  # FALSE and NULL select no row
        if isinstance(node, Or):
            out: set[int] = set()
            for child in node.children:
                sub = self.buckets(child)
                if sub is None:
                    return None
                out |= sub
            return frozenset(out)
        if isinstance(node, And):
            return self._conjunction(conjuncts(node))
        if isinstance(node, (Not, Opaque, StartsWith)):
            return None
        return self._conjunction([node])

    def _conjunction(self, parts: list[Node]) -> Buckets:
        fixed: dict[int, set[Any]] = {}
        result: Buckets = None
        for part in parts:
            pinned = self._pinned(part)
            if pinned is not None:
                index, values = pinned
                fixed[index] = values if index not in fixed else fixed[index] & values
            elif isinstance(part, (Or, Const)):
                result = _intersect(result, self.buckets(part))
        if len(fixed) == len(self.columns):
            result = _intersect(result, self._hash_product([fixed[i] for i in range(len(self.columns))]))
        return result

    def _pinned(self, node: Node) -> tuple[int, set[Any]] | None:
        """(bucket column index, the finite set of values it may take) when `node` pins one."""
        if isinstance(node, (Cmp, InList)) and (isinstance(node, InList) or node.op in ("=", "<=>")):
            # A NULL in an IN list never matches (x IN (1, NULL) is NULL, not TRUE, for other x).
            index = self._index(node.col.name)
            values = None if index is None else self._values(
                index, node.values if isinstance(node, InList) else [node.value])
            return None if index is None or values is None else (index, values)
        if isinstance(node, IsNull):
            index = self._index(node.col.name)
            return None if index is None else (index, {_NULL})
        if isinstance(node, Or):
            found = [self._pinned(c) for c in node.children]
            if found and all(f is not None for f in found) and len({f[0] for f in found if f}) == 1:
                values: set[Any] = set()
                for f in found:
                    assert f is not None
                    values |= f[1]
                return found[0][0], values  # type: ignore[index]
        return None

    def _values(self, index: int, values: Any) -> set[Any]:
        """Literals as values of the column's type, so that equal values are one set member.

        An integer column compared with 1.0 (a decimal or double literal) matches the integer 1;
        a fractional literal matches no integer at all."""
        type_ = self.types[index]
        if type_ not in INTEGER_TYPES:
            return set(values)
        out: set[Any] = set()
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, float, Decimal)):
                out.add(v)
            elif isinstance(v, int) or (math.isfinite(v) and v == int(v)):
                out.add(int(v))
        return out

    def _index(self, name: str) -> int | None:
        try:
            return self.lowered.index(name.lower())
        except ValueError:
            return None

    def _hash_product(self, value_sets: list[set[Any]]) -> Buckets:
        total = 1
        for values in value_sets:
            total *= len(values)
        if total == 0:
            return frozenset()
        if total > MAX_COMBINATIONS:
            return None
        rows = list(itertools.product(*[list(v) for v in value_sets]))
        try:
            arrays = [_array([r[i] for r in rows], t) for i, t in enumerate(self.types)]
        except InvalidArgumentError:
            return None  # a literal the column type cannot hold exactly: do not prune on it
        return frozenset(int(b) for b in bucket_ids(arrays, self.types, self.n))


def _array(values: list[Any], type_: Any) -> pa.Array:
    return literal_array([None if v is _NULL else v for v in values], type_)


def _intersect(a: Buckets, b: Buckets) -> Buckets:
    if a is None:
        return b
    if b is None:
        return a
    return a & b
