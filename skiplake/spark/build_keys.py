"""The distinct join-key values of a build side, computed by Spark: what dynamic file pruning
sends to a probe's planner (skiplake.skipping.dynamic turns them into a predicate)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from pyspark.sql import functions as F

from skiplake.expr.tree import Col
from skiplake.skipping.dynamic import KeyFilter, key_filter

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# Keys collected at most; past it each key column sends one range, its min and max.
KEY_CAP = 1_000_000


@dataclass(frozen=True)
class BuildKeys:
    columns: list[list[Any]]   # per key column: its distinct non-null values, or [min, max] when bounded
    bounded: bool = False      # more keys than KEY_CAP: only each column's min and max
    seconds: float = 0.0       # the Spark job's time

    @property
    def count(self) -> int:
        return max((len(c) for c in self.columns), default=0)

    def key_filter(self, i: int, column: Col, max_values: int, max_ranges: int) -> KeyFilter:
        """The filter key column `i` gives the probe's `column`: values or ranges as the limits
        allow, or the one range [min, max] when the keys were bounded."""
        if self.bounded:
            return key_filter(column, self.columns[i], 0, 1)
        return key_filter(column, self.columns[i], max_values, max_ranges)


# Rows collected as they are (one stage, no shuffle) before the keys are made distinct by Spark.
_DIRECT_ROWS = 200_000


def distinct_keys(df: "DataFrame", keys: Sequence["Column"]) -> BuildKeys:
    """Distinct non-null values of each of `keys` over `df`, from the rows where every key is
    non-null (an equi-join matches no NULL)."""
    started = time.perf_counter()
    cols = [k.alias(f"k{i}") for i, k in enumerate(keys)]
    rows = df.select(*cols).dropna()
    # A small build side is read in one stage and deduplicated here; a shuffle costs more.
    direct = rows.limit(_DIRECT_ROWS + 1).toArrow()
    if direct.num_rows <= _DIRECT_ROWS:
        values = [_unique(direct.column(i).to_pylist()) for i in range(len(cols))]
        return BuildKeys(values, seconds=time.perf_counter() - started)
    distinct = rows.distinct()
    table = distinct.limit(KEY_CAP + 1).toArrow()
    if table.num_rows > KEY_CAP:
        row = distinct.agg(*[f(F.col(f"k{i}")) for i in range(len(cols)) for f in (F.min, F.max)]).collect()[0]
        bounds = [[row[2 * i], row[2 * i + 1]] for i in range(len(cols))]
        return BuildKeys(bounds, bounded=True, seconds=time.perf_counter() - started)
    values = [table.column(i).to_pylist() for i in range(len(cols))]
    return BuildKeys(values, seconds=time.perf_counter() - started)


def _unique(values: list[Any]) -> list[Any]:
    return list(dict.fromkeys(values))
