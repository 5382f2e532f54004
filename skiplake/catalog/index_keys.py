"""Partition index keys: an order-preserving string per partition, and the range a query scans.

A partition index over keys (k1, ..., kn) stores, per partition, one string that sorts (byte
by byte, as SQLite's BINARY and PostgreSQL's "C" collation compare text) exactly as the tuple
of typed values sorts:

- integers: the value plus 2**63, as 20 zero-padded digits (so -1 < 0 < 10 as strings);
- dates: YYYY-MM-DD, zero-padded (0000-01-01 .. 9999-12-31, what Glue indexes);
- strings: as they are. U+0000, U+0001 and U+0002 are refused in indexed values (as Glue does),
  which is what makes them free to use as separators:

  components are joined by U+0001, which sorts below every allowed character, so a tuple's
  string sorts before any longer tuple it prefixes and tuple order is string order. U+0002 is
  the successor of the separator: every key that continues the components P lies in
  [P + U+0001, P + U+0002), and no allowed character falls between U+0001 and U+0002.

A query uses an index when its top-level AND conjuncts fix the index's first keys by equality
and then, optionally, bound the next key by a range (>, >=, <, <=, BETWEEN): that is one B-tree
range scan. Everything else in the expression (IN, LIKE, OR, NOT, later keys) is evaluated on
the partitions the scan returns.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Sequence

from skiplake.catalog.expression import Between, Compare, Expr, Key, conjuncts, typed_value

SEP = "\x01"
END = "\x02"
FORBIDDEN = ("\x00", "\x01", "\x02")
INDEXABLE_KINDS = ("integer", "date", "string")
_INT_OFFSET = 1 << 63


def encode_component(value: Any, kind: str) -> str:
    """One value's component of an index string: an integer offset by 2**63 and zero-padded, a date as
    YYYY-MM-DD, a string as it is."""
    if kind == "integer":
        return f"{int(value) + _INT_OFFSET:020d}"
    if kind == "date":
        d = value if isinstance(value, dt.date) else typed_value(str(value), "date")
        return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"
    return str(value)


def encode(values: Sequence[Any], kinds: Sequence[str]) -> str:
    """The index string of a partition's typed values for the index's keys, in index order."""
    return SEP.join(encode_component(v, k) for v, k in zip(values, kinds))


def index_problem(raw: str | None, kind: str) -> str | None:
    """Why a stored value cannot be indexed: Glue's backfill error code, or None if it can."""
    if raw is None:
        return "MISSING_PARTITION_VALUE_ERROR"
    if any(ch in raw for ch in FORBIDDEN):
        return "UNSUPPORTED_PARTITION_CHARACTER_ERROR"
    try:
        value = typed_value(raw, kind)
    except ValueError:
        return "INVALID_PARTITION_TYPE_DATA_ERROR"
    if kind == "integer" and not -_INT_OFFSET <= value < _INT_OFFSET:
        return "INVALID_PARTITION_TYPE_DATA_ERROR"
    if kind == "date" and not 0 <= value.year <= 9999:
        return "INVALID_PARTITION_TYPE_DATA_ERROR"
    return None


@dataclass(frozen=True)
class KeyRange:
    """Index strings s with low <= s < high; None = unbounded. (_ranged puts a value's exclusive low
    bound and inclusive high bound in this form by appending END.)"""
    low: str | None
    high: str | None
    keys_used: tuple[str, ...]   # index keys the range constrains, for explain output
    # The expression's AND conjuncts that every key in the range satisfies: a candidate the
    # index returns needs only the other conjuncts tested.
    covered: tuple[Expr, ...] = ()

    def contains(self, s: str) -> bool:
        """Whether index string `s` is in the range."""
        return (self.low is None or s >= self.low) and (self.high is None or s < self.high)


def _bounds(preds: list[Expr]) -> tuple[tuple[Any, bool] | None, tuple[Any, bool] | None]:
    """The tightest (value, inclusive) lower and upper bound the range predicates give."""
    low: tuple[Any, bool] | None = None
    high: tuple[Any, bool] | None = None

    def tighter_low(b: tuple[Any, bool]) -> None:
        nonlocal low
        if low is None or b[0] > low[0] or (b[0] == low[0] and not b[1]):
            low = b

    def tighter_high(b: tuple[Any, bool]) -> None:
        nonlocal high
        if high is None or b[0] < high[0] or (b[0] == high[0] and not b[1]):
            high = b

    for p in preds:
        if isinstance(p, Between):
            tighter_low((p.low, True))
            tighter_high((p.high, True))
        elif isinstance(p, Compare):
            if p.op in (">", ">="):
                tighter_low((p.value, p.op == ">="))
            elif p.op in ("<", "<="):
                tighter_high((p.value, p.op == "<="))
    return low, high


def _literals(p: Compare | Between) -> tuple[Any, ...]:
    return (p.low, p.high) if isinstance(p, Between) else (p.value,)


def plan_range(expr: Expr, index_keys: Sequence[Key]) -> KeyRange | None:
    """The index range `expr` allows, or None when the index cannot be used (its first key is
    not fixed by an equality or bounded by a range among the expression's AND conjuncts)."""
    parts = conjuncts(expr)
    prefix: list[str] = []
    used: list[str] = []
    covered: list[Expr] = []
    for key in index_keys:
        mine = _usable(parts, key)
        equal = [p for p in mine if isinstance(p, Compare) and p.op == "="]
        if equal:
            if len({p.value for p in equal}) > 1:
                return KeyRange("", "", tuple(used + [key.name]))  # a = 1 AND a = 2: nothing
            prefix.append(encode_component(equal[0].value, key.kind))
            used.append(key.name)
            covered += equal   # a range on this key besides is not in the key range: not covered
            continue
        ranged: list[Expr] = [p for p in mine if isinstance(p, Between)
                              or (isinstance(p, Compare) and p.op in ("<", "<=", ">", ">="))]
        if not ranged:
            break
        return _ranged(prefix, key, ranged, tuple(used + [key.name]), tuple(covered + ranged))
    if not used:
        return None
    fixed = SEP.join(prefix)
    if len(used) == len(index_keys):
        # the whole key is fixed: exactly that string
        return KeyRange(fixed, fixed + SEP, tuple(used), tuple(covered))
    return KeyRange(fixed + SEP, fixed + END, tuple(used), tuple(covered))


def _usable(parts: Sequence[Expr], key: Key) -> list[Expr]:
    """The comparisons of `key` a range can hold. Conjuncts whose literal has no index string (an
    integer past 64 bits, a string with a separator character) stay out of the range, so they
    are tested on each candidate."""
    return [p for p in parts if isinstance(p, (Compare, Between)) and p.key.name == key.name
            and all(index_problem(str(v), key.kind) is None for v in _literals(p))]


def _ranged(prefix: list[str], key: Key, ranged: list[Expr], used: tuple[str, ...],
            covered: tuple[Expr, ...]) -> KeyRange:
    """The range of keys starting with the fixed `prefix` whose next component `ranged` bounds."""
    low, high = _bounds(ranged)
    fixed = SEP.join(prefix)
    head = fixed + SEP if prefix else ""
    # An exclusive low / inclusive high bound steps over every key whose component is the
    # bound itself (bound, or bound + SEP + ...) by appending END.
    lo = head if low is None else head + encode_component(low[0], key.kind) + ("" if low[1] else END)
    if high is None:
        hi: str | None = fixed + END if prefix else None
    else:
        hi = head + encode_component(high[0], key.kind) + (END if high[1] else "")
    return KeyRange(lo, hi, used, covered)
