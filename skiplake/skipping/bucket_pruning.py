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
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skiplake.errors import InvalidArgumentError
from skiplake.expr.tree import And, Cmp, Const, InList, IsNull, Node, Not, Opaque, Or, StartsWith
from skiplake.expr.visitor import BooleanVisitor, visit
from skiplake.layout.bucket_spec import BUCKET_TAG
from skiplake.layout.bucketing import bucket_ids, literal_array
from skiplake.log.arrow_schema import map_value
from skiplake.log.schema import INTEGER_TYPES

MAX_COMBINATIONS = 65_536
_NULL = object()  # a NULL of a bucket column (hashes by leaving the seed unchanged)

Buckets = frozenset[int] | None  # None: every bucket


def selected_buckets(node: Node | None, columns: Sequence[str], types: Sequence[Any], num_buckets: int) -> Buckets:
    """The buckets that may hold a row matching `node`, or None when every bucket may."""
    if node is None:
        return None
    return visit(node, _BucketPruner(list(columns), list(types), num_buckets)).buckets


def file_bucket_ids(files: pa.Table) -> np.ndarray:
    """Each file's bucket id from its add tags (BUCKET_TAG); -1 for a file that has none."""
    if files.num_rows == 0:
        return np.zeros(0, dtype=np.int64)
    found = map_value(files.column("tags"), BUCKET_TAG)
    # A tag that is not a number (another tool's) counts as none.
    numeric = pc.if_else(pc.utf8_is_digit(found), found, pa.scalar(None, pa.string()))
    return pc.fill_null(pc.cast(numeric, pa.int64()), -1).to_numpy(zero_copy_only=False).astype(np.int64)


@dataclass(frozen=True)
class _Selection:
    """What a sub-predicate says about the rows it accepts: for some bucket columns (by index),
    the finite set of values they may take, and the buckets such rows may hash to."""
    pins: Mapping[int, frozenset[Any]]
    buckets: Buckets


_ANY = _Selection({}, None)
_NOTHING = _Selection({}, frozenset())


class _BucketPruner(BooleanVisitor[_Selection]):
    def __init__(self, columns: list[str], types: list[Any], num_buckets: int) -> None:
        self.lowered = [c.lower() for c in columns]
        self.types = types
        self.n = num_buckets
        self._hashed: dict[tuple[frozenset[Any], ...], Buckets] = {}

    # ---- leaves: =, <=>, IN and IS NULL on a bucket column pin it to finitely many values

    def visit_cmp(self, node: Cmp) -> _Selection:
        if node.op not in ("=", "<=>"):
            return _ANY
        return self._pinned(node.col.name, [node.value])

    def visit_in(self, node: InList) -> _Selection:
        # A NULL in an IN list never matches (x IN (1, NULL) is NULL, not TRUE, for other x).
        return self._pinned(node.col.name, node.values)

    def visit_is_null(self, node: IsNull) -> _Selection:
        index = self._index(node.col.name)
        return _ANY if index is None else self._settled({index: frozenset({_NULL})}, None)

    def visit_const(self, node: Const) -> _Selection:
        return _ANY if node.value is True else _NOTHING  # FALSE and NULL select no row

    def visit_opaque(self, node: Opaque) -> _Selection:
        return _ANY

    def visit_starts_with(self, node: StartsWith) -> _Selection:
        return _ANY

    def visit_not(self, node: Not, child: _Selection) -> _Selection:
        return _ANY  # the complement of a finite value set is infinite

    # ---- AND intersects what its children allow, OR unites it

    def visit_and(self, node: And, children: list[_Selection]) -> _Selection:
        pins: dict[int, frozenset[Any]] = {}
        buckets: Buckets = None
        for child in children:
            for index, values in child.pins.items():
                pins[index] = values if index not in pins else pins[index] & values
            buckets = _intersect(buckets, child.buckets)
        return self._settled(pins, buckets)

    def visit_or(self, node: Or, children: list[_Selection]) -> _Selection:
        common = set.intersection(*[set(c.pins) for c in children]) if children else set()
        pins = {i: frozenset().union(*[c.pins[i] for c in children]) for i in common}
        buckets: Buckets = frozenset()
        for child in children:
            buckets = None if buckets is None or child.buckets is None else buckets | child.buckets
        return self._settled(pins, buckets)

    # ---- helpers

    def _pinned(self, name: str, values: Sequence[Any]) -> _Selection:
        index = self._index(name)
        if index is None:
            return _ANY
        return self._settled({index: self._values(index, values)}, None)

    def _settled(self, pins: Mapping[int, frozenset[Any]], buckets: Buckets) -> _Selection:
        """Add the buckets the pinned values hash to, once every bucket column is pinned."""
        if any(not values for values in pins.values()):
            return _NOTHING  # a column pinned to no value: no row qualifies
        if len(pins) == len(self.types):
            key = tuple(pins[i] for i in range(len(self.types)))
            if key not in self._hashed:
                self._hashed[key] = self._hash_product(list(key))
            buckets = _intersect(buckets, self._hashed[key])
        return _Selection(pins, buckets)

    def _values(self, index: int, values: Sequence[Any]) -> frozenset[Any]:
        """Literals as values of the column's type, so that equal values are one set member.

        An integer column compared with 1.0 (a decimal or double literal) matches the integer 1;
        a fractional literal matches no integer at all."""
        if self.types[index] not in INTEGER_TYPES:
            return frozenset(values)
        out: set[Any] = set()
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, float, Decimal)):
                out.add(v)
            elif isinstance(v, int) or (math.isfinite(v) and v == int(v)):
                out.add(int(v))
        return frozenset(out)

    def _index(self, name: str) -> int | None:
        try:
            return self.lowered.index(name.lower())
        except ValueError:
            return None

    def _hash_product(self, value_sets: list[frozenset[Any]]) -> Buckets:
        total = 1
        for values in value_sets:
            total *= len(values)
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
