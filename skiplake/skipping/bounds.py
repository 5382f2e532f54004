"""A file's stats as bounds on a column's values, and what those bounds decide about a comparison.

This is the one home of these rules. Each is written in two forms, side by side: for one file's
Python values (`file_bounds`, `compare`, ...: the per-file evaluator of metrics.py, which the
conflict checker and DML use) and for Arrow arrays over all files (`bound_arrays`,
`compare_arrays`, ...: stats_table.py and columnar.py, which the scan planner, partition pruning
and dynamic pruning use). tests/unit/test_bounds.py checks that the two forms agree and that
neither ever skips a file holding a row that matches.

How stats become bounds:
- a string min or max of STRING_PREFIX_LENGTH characters or more may have been cut: the bounds
  are then not exact, and a cut max is an upper bound only when it ends in MAX_CHAR (Delta's
  marker); a bare prefix is no upper bound at all;
- Delta stores timestamp stats truncated to milliseconds: the true max may be up to 999
  microseconds more, so the max is raised by 1 ms;
- NaN is no bound (Spark sorts NaN above every number; the comparisons here do not);
- a float column's stat is the shortest decimal of a float32, and Spark compares that float32
  widened to a double: so is the bound;
- a double column that was a float (type widening) still has files whose stat names a float:
  their bounds widen outward to that float32 too;
- a null count equal to the row count means every value is NULL; a file of no rows has none.

What bounds decide: for `col OP v`, whether some value in [min, max] may make it TRUE and
whether some may make it FALSE (an unknown bound answers "maybe"). NULLs are the callers'.
"""
from __future__ import annotations

import datetime as dt
import math
import operator
from decimal import Decimal, InvalidOperation
from typing import Any, Callable, Sequence, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skiplake.layout.sortable import sortable
from skiplake.log.schema import INTEGER_TYPES, Field, is_decimal, is_primitive
from skiplake.log.stats import MAX_CHAR, STRING_PREFIX_LENGTH
from skiplake.log.type_widening import once_float
from skiplake.log.values import TIMESTAMP_TYPES, float32, parse_timestamp

_MS = dt.timedelta(milliseconds=1)

# ------------------------------------------------------------------ stats to bounds: one file


def stat_value(value: Any, type_: Any) -> Any:
    """A min or max from a file's stats JSON as a typed value; None when it bounds nothing (NaN,
    a value not of the type)."""
    if value is None or not is_primitive(type_):
        return None
    try:
        if type_ in INTEGER_TYPES:
            return int(value)
        if type_ in ("float", "double"):
            f = float(value)
            if math.isnan(f):
                return None
            return float32(f) if type_ == "float" else f
        if is_decimal(type_):
            return Decimal(str(value))
        if type_ == "string":
            return value if isinstance(value, str) else None
        if type_ == "date":
            return dt.date.fromisoformat(str(value)[:10])
        if type_ in TIMESTAMP_TYPES:
            return parse_timestamp(str(value))
        if type_ == "boolean":
            return value if isinstance(value, bool) else None
    except (ValueError, InvalidOperation):
        return None
    return None


def file_bounds(field: Field, lo: Any, hi: Any) -> tuple[Any, Any, bool]:
    """(lower bound, upper bound, whether both are actual values) from one file's typed min and
    max of `field` (None: unknown)."""
    type_ = field.type
    exact = True
    if type_ == "string":
        if isinstance(hi, str) and len(hi) >= STRING_PREFIX_LENGTH:
            exact = False
            if not hi.endswith(MAX_CHAR):
                hi = None
        if isinstance(lo, str) and len(lo) >= STRING_PREFIX_LENGTH:
            exact = False
    if type_ in TIMESTAMP_TYPES and hi is not None:
        hi, exact = hi + _MS, False
    if type_ == "double" and once_float(field):
        lo, hi, exact = _widened(lo, min), _widened(hi, max), False
    return lo, hi, exact and lo is not None and hi is not None


def _widened(value: Any, pick: Callable[[float, float], float]) -> Any:
    if not isinstance(value, float) or not math.isfinite(value):
        return value
    return pick(value, float32(value))


def null_facts(null_count: Any, num_records: Any) -> tuple[bool, bool]:
    """(some value may be NULL, every value is NULL) from one file's null count and row count
    (None: unknown). A file of no rows counts as all NULL."""
    if num_records == 0:
        return True, True
    may_null = null_count is None or null_count > 0
    all_null = null_count is not None and num_records is not None and null_count >= num_records
    return may_null, all_null


def is_no_bound(value: Any) -> bool:
    """Whether a typed partition value bounds nothing: NaN, which Spark sorts above every number
    and the comparisons here do not."""
    return isinstance(value, float) and math.isnan(value)


# ------------------------------------------------------------------ stats to bounds: all files

# A column's bounds over every file: one array, or the chunks a checkpoint's typed stats were read
# in (joining them copied every bound: 0.3 to 0.5 s of a plan at ten million files).
Bounds: TypeAlias = pa.Array | pa.ChunkedArray


def bound_arrays(field: Field, lo: Bounds, hi: Bounds) -> tuple[Bounds, Bounds, np.ndarray]:
    """`file_bounds` over arrays of every file's typed min and max (null: unknown)."""
    type_ = field.type
    exact = np.ones(len(lo), dtype=bool)
    if type_ == "string":
        long_hi = _np(pc.greater_equal(pc.utf8_length(hi), STRING_PREFIX_LENGTH), False)
        long_lo = _np(pc.greater_equal(pc.utf8_length(lo), STRING_PREFIX_LENGTH), False)
        marked = _np(pc.ends_with(hi, MAX_CHAR), False)
        hi = pc.if_else(pa.array(long_hi & ~marked), pa.scalar(None, pa.string()), hi)
        exact &= ~long_hi & ~long_lo
    if type_ in TIMESTAMP_TYPES:
        hi = pc.add(hi, pa.scalar(1000, pa.duration("us")))
        exact[:] = False
    if type_ in ("float", "double"):
        lo, hi = _no_nan(lo), _no_nan(hi)
        if type_ == "float":
            lo, hi = _as_float32(lo), _as_float32(hi)
        elif once_float(field):
            lo, hi = pc.min_element_wise(lo, _as_float32(lo)), pc.max_element_wise(hi, _as_float32(hi))
            exact[:] = False
    return lo, hi, exact & np.asarray(lo.is_valid()) & np.asarray(hi.is_valid())


def null_fact_arrays(null_count: np.ndarray, num_records: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`null_facts` over every file's null count and row count (NaN: unknown), and which files
    have no rows (their bounds are exact: there is no value to bound)."""
    # A comparison with NaN (unknown) is false: no copies without NaN needed, at 10M files.
    empty = num_records == 0
    may_null = np.isnan(null_count) | (null_count > 0) | empty
    all_null = (null_count >= num_records) | empty
    return may_null, all_null, empty


def _no_nan(values: Bounds) -> Bounds:
    return pc.if_else(pc.fill_null(pc.is_nan(values), False), pa.scalar(None, values.type), values)


def _as_float32(values: Bounds) -> Bounds:
    return pc.cast(pc.cast(values, pa.float32(), safe=False), pa.float64())


# ------------------------------------------------------------------ what bounds decide

# For `col OP v`: the test on one bound showing that some value in [min, max] makes it TRUE,
# then the one showing that some value makes it FALSE.
RANGE_TESTS: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "<": (("min", "<"), ("max", ">=")),
    "<=": (("min", "<="), ("max", ">")),
    ">": (("max", ">"), ("min", "<=")),
    ">=": (("max", ">="), ("min", "<")),
}
EQUALITIES = ("=", "<=>", "<>")
_PYTHON = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_ARROW = {"<": pc.less, "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal}


def compare(op: str, lo: Any, hi: Any, exact: bool, v: Any) -> tuple[bool, bool]:
    """(may be TRUE, may be FALSE) of `col op v` over one file's non-null values in [lo, hi].
    Raises TypeError when a bound does not compare with `v`."""
    if op in EQUALITIES:
        inside = (lo is None or lo <= v) and (hi is None or v <= hi)
        single = exact and lo is not None and hi is not None and lo == v and hi == v
        return (inside, not single) if op != "<>" else (not single, inside)
    if op not in RANGE_TESTS:
        return True, True
    bounds = {"min": lo, "max": hi}
    may_true, may_false = (bounds[b] is None or _PYTHON[test](bounds[b], v) for b, test in RANGE_TESTS[op])
    return may_true, may_false


def compare_arrays(op: str, lo: Bounds, hi: Bounds, exact: np.ndarray,
                   v: pa.Scalar) -> tuple[np.ndarray, np.ndarray] | None:
    """`compare` over every file's bounds; None for an operator bounds cannot decide."""
    if op in EQUALITIES:
        inside = _np(pc.less_equal(lo, v), True) & _np(pc.less_equal(v, hi), True)
        single = exact & _np(pc.equal(lo, v), False) & _np(pc.equal(hi, v), False)
        return (inside, ~single) if op != "<>" else (~single, inside)
    if op not in RANGE_TESTS:
        return None
    bounds = {"min": lo, "max": hi}
    can_t, can_f = (_np(_ARROW[test](bounds[b], v), True) for b, test in RANGE_TESTS[op])
    return can_t, can_f


def in_list(lo: Any, hi: Any, exact: bool, values: Sequence[Any]) -> tuple[bool, bool]:
    """(may be TRUE, may be not TRUE) of `col IN values` over one file's non-null values."""
    can_t = any((lo is None or lo <= v) and (hi is None or v <= hi) for v in values)
    single = exact and lo is not None and lo == hi
    return can_t, not (single and lo in values)


def in_list_arrays(lo: Bounds, hi: Bounds, exact: np.ndarray, values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """`in_list` over every file's bounds; `values` holds the list in the column's Arrow type."""
    single = exact & _np(pc.equal(lo, hi), False) & _np(pc.is_in(lo, value_set=values), False)
    return _any_inside(lo, hi, values), ~single


def starts_with(lo: Any, hi: Any, prefix: str) -> tuple[bool, bool]:
    """(may be TRUE, may be FALSE) of `col LIKE 'prefix%'` over one file's non-null strings."""
    if not isinstance(lo, (str, type(None))) or not isinstance(hi, (str, type(None))):
        return True, True
    can_t = (hi is None or hi >= prefix) and (lo is None or lo[: len(prefix)] <= prefix)
    both = lo is not None and hi is not None and lo.startswith(prefix) and hi.startswith(prefix)
    return can_t, not both


def starts_with_arrays(lo: Bounds, hi: Bounds, prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """`starts_with` over every file's string bounds."""
    head = pc.utf8_slice_codeunits(lo, 0, len(prefix))
    can_t = _np(pc.greater_equal(hi, prefix), True) & _np(pc.less_equal(head, prefix), True)
    both = _np(pc.starts_with(lo, prefix), False) & _np(pc.starts_with(hi, prefix), False)
    return can_t, ~both


def _np(mask: Bounds, fill: bool) -> np.ndarray:
    """A comparison's result as booleans, an unknown bound's NULL read as `fill`."""
    return np.asarray(pc.fill_null(mask, fill), dtype=bool)


def _any_inside(lo: Bounds, hi: Bounds, values: pa.Array) -> np.ndarray:
    """For each file, whether some value v has lo <= v <= hi (unknown bounds are open). A long
    list is matched by binary search, so 10,000 values cost about as much as one."""
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
