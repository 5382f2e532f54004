"""The part of dynamic file pruning that needs no Spark: build keys as a predicate on the probe.

A join's build side, evaluated at run time, gives the key values the probe side can match. Here
those values become a bound predicate on the probe table's key column: `k IN (values)` when
there are at most `max_values` of them (the columnar evaluator matches an IN list against file
bounds by binary search), else `k BETWEEN lo AND hi OR ...` over at most `max_ranges` ranges
cut at the widest gaps between consecutive keys. Either prunes partitions, min/max stats and, on
the bucket column, buckets, exactly as a literal predicate would. NULL keys match nothing in an
equi-join and are dropped; a key the probe column's type cannot hold matches nothing either.

`file_overlap` says whether pruning by a key can pay off at all: the average share of a table's
files whose [min, max] range a single key value falls into. Files clustered by the key (Z-order,
partitioning) give a few percent; files that each span the whole range give about 100%, and the
build side is then not worth evaluating.
"""
from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from skiplake.expr.sql import sql_name
from skiplake.expr.tree import And, Cmp, Col, Const, InList, Node, Or
from skiplake.layout.sortable import sortable
from skiplake.log.schema import INTEGER_TYPES, is_decimal, plain_kind
from skiplake.log.values import TIMESTAMP_TYPES
from skiplake.skipping.stats_table import StatsTable

_INT_RANGES = {"byte": (-2 ** 7, 2 ** 7 - 1), "short": (-2 ** 15, 2 ** 15 - 1), "integer": (-2 ** 31, 2 ** 31 - 1),
               "long": (-2 ** 63, 2 ** 63 - 1)}


@dataclass(frozen=True)
class KeyFilter:
    """The dynamic filter a build side gives one probe column."""
    column: Col
    predicate: Node          # bound on the probe column
    keys: int                # distinct non-null build keys the column can hold
    ranges: int = 0          # 0 when the keys are sent as values, else how many ranges

    def text(self, source: str) -> str:
        """`ss_item_sk IN (keys of <source>)`, as explain output shows it."""
        how = "IN" if not self.ranges else f"IN {self.ranges} RANGES OF"
        return f"{sql_name(self.column.name)} {how} ({self.keys:,} keys of {source})"


# Keys collected at most; past it each key column sends one range, its min and max.
KEY_CAP = 1_000_000


@dataclass(frozen=True)
class BuildKeys:
    """The keys a build side of a join produced, per key column, and how they were computed."""
    columns: list[list[Any]]   # per key column: its distinct non-null values, or [min, max] when bounded
    bounded: bool = False      # more keys than KEY_CAP: only each column's min and max
    seconds: float = 0.0       # the time to compute them
    local: bool = False        # read in the driver (skiplake.skipping.local_build), not by a Spark job
    # (key column, probe type, max_ranges) -> the keys as the type's sorted values and their ranges:
    # one build feeds several probes (a date build the three sales channels), and sorting and
    # cutting 10,000 keys takes milliseconds.
    _made: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def count(self) -> int:
        """The number of keys of the key column with the most (2, its min and max, when bounded)."""
        return max((len(c) for c in self.columns), default=0)

    def key_filter(self, i: int, column: Col, max_values: int, max_ranges: int) -> KeyFilter:
        """The filter key column `i` gives the probe's `column`: values or ranges as the limits
        allow, or the one range [min, max] when the keys were bounded."""
        if self.bounded:
            return key_filter(column, self.columns[i], 0, 1)
        made = self._made.get((i, column.type, max_ranges))
        if made is None:
            values = probe_values(self.columns[i], column.type)
            made = self._made[(i, column.type, max_ranges)] = (values, None)
        values, spans = made
        if len(values) > max_values and spans is None:
            spans = _ranges(values, max_ranges)
            self._made[(i, column.type, max_ranges)] = (values, spans)
        return _filter_of(column, values, max_values, spans)


def key_filter(column: Col, keys: Sequence[Any], max_values: int, max_ranges: int) -> KeyFilter:
    """The predicate that keeps the probe's files that may hold one of `keys` in `column`."""
    values = probe_values(keys, column.type)
    return _filter_of(column, values, max_values, _ranges(values, max_ranges) if len(values) > max_values else None)


def probe_values(keys: Sequence[Any], type_: Any) -> list[Any]:
    """The keys as values of the probe column's type, sorted and distinct (NULLs and keys the
    type cannot hold dropped)."""
    values = _plain_values(keys, type_)
    if values is None:
        values = sorted(v for v in (probe_value(k, type_) for k in keys) if v is not None)
        values = [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]]
    return values


def _filter_of(column: Col, values: list[Any], max_values: int, spans: list[tuple[Any, Any]] | None) -> KeyFilter:
    if not values:
        return KeyFilter(column, Const(False), 0)
    if len(values) <= max_values or spans is None:
        return KeyFilter(column, InList(column, tuple(values)), len(values))
    parts: list[Node] = [Cmp("=", column, lo) if lo == hi else And((Cmp(">=", column, lo), Cmp("<=", column, hi)))
                         for lo, hi in spans]
    return KeyFilter(column, parts[0] if len(parts) == 1 else Or(tuple(parts)), len(values), len(spans))


def _plain_values(keys: Sequence[Any], type_: Any) -> list[Any] | None:
    """The keys sorted and distinct, when all are of the plain kind the column takes as is (ints
    for an integer column, strings, dates): what probe_value gives them, in one pass (a build
    sends thousands). None for any other mix."""
    kind = plain_kind(type_)
    if kind is None or not all(type(k) is kind or k is None for k in keys):
        return None
    distinct = {k for k in keys if k is not None}
    if kind is int:
        lo, hi = _INT_RANGES[type_]
        distinct = {k for k in distinct if lo <= k <= hi}
    return sorted(distinct)


def probe_value(value: Any, type_: Any) -> Any:
    """A build key as a value of the probe column's type; None when no value of that type equals it."""
    if value is None:
        return None
    if type_ in INTEGER_TYPES:
        if isinstance(value, bool) or not isinstance(value, (int, Decimal)) or value != int(value):
            return None
        lo, hi = _INT_RANGES[type_]
        return int(value) if lo <= value <= hi else None
    if is_decimal(type_):
        return _decimal_value(value, type_)
    if type_ == "string":
        return value if isinstance(value, str) else None
    if type_ == "date":
        return value if isinstance(value, dt.date) and not isinstance(value, dt.datetime) else None
    if type_ in TIMESTAMP_TYPES and isinstance(value, dt.datetime):
        # Arrow gives Spark's TIMESTAMP as UTC with a zone; the log's values are naive UTC.
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None) if value.tzinfo else value
    if type_ == "boolean":
        return value if isinstance(value, bool) else None
    return None


def _decimal_value(value: Any, type_: str) -> Decimal | None:
    """The key as a value of decimal(p, s), or None when it has more digits than the type holds."""
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        return None
    precision, scale = (int(x) for x in type_[len("decimal("):-1].split(","))
    d = Decimal(value)
    if not d.is_finite() or d != d.quantize(Decimal(1).scaleb(-scale)) or d.adjusted() >= precision - scale:
        return None
    return d


def _ranges(values: list[Any], max_ranges: int) -> list[tuple[Any, Any]]:
    """Sorted distinct values cut into at most `max_ranges` runs: at the widest gaps when the
    values have a distance (numbers, dates), else into runs of equal count."""
    n = len(values)
    if max_ranges <= 1 or n == 1:
        return [(values[0], values[-1])]
    gaps = _gaps(values)
    if gaps is None:
        size = math.ceil(n / max_ranges)
        return [(values[i], values[min(i + size, n) - 1]) for i in range(0, n, size)]
    cuts = np.sort(np.argsort(-gaps, kind="stable")[:max_ranges - 1]) + 1
    starts = [0, *cuts.tolist()]
    ends = [*cuts.tolist(), n]
    return [(values[s], values[e - 1]) for s, e in zip(starts, ends)]


def _gaps(values: list[Any]) -> np.ndarray | None:
    first = values[0]
    if isinstance(first, bool):
        return None
    if isinstance(first, (int, Decimal)):
        numbers = np.array([float(v) for v in values])
    elif isinstance(first, dt.datetime):
        numbers = np.array([v.timestamp() for v in values])
    elif isinstance(first, dt.date):
        numbers = np.array([v.toordinal() for v in values], dtype=float)
    else:
        return None
    return np.diff(numbers)


def file_overlap(stats: StatsTable, column: str) -> float:
    """The average share of files whose [min, max] of `column` contains a given file's values:
    about 1/files when files are clustered by the column, about 1 when every file spans it all.
    Files with unknown bounds overlap everything."""
    n = stats.num_files
    if n == 0:
        return 0.0
    col = stats.column(column)
    known = np.asarray(col.min.is_valid()) & np.asarray(col.max.is_valid()) & ~col.all_null
    if not known.any():
        return 1.0
    try:
        lo, hi = sortable(col.min.filter(pa.array(known))), sortable(col.max.filter(pa.array(known)))
    except TypeError:
        return 1.0
    lo_sorted, hi_sorted = np.sort(lo), np.sort(hi)
    # Files j with lo_j <= hi_i, minus those entirely below lo_i (hi_j < lo_i).
    overlapping = np.searchsorted(lo_sorted, hi, side="right") - np.searchsorted(hi_sorted, lo, side="left")
    unknown = n - int(known.sum())
    shares = (overlapping + unknown) / n
    return float((shares.sum() + unknown) / n)
