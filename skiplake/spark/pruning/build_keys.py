"""The distinct join-key values of a build side, computed by Spark: what dynamic file pruning
sends to a probe's planner (skiplake.skipping.key_filters turns them into a predicate)."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Sequence

from pyspark.sql import functions as F

from skiplake.skipping.key_filters import KEY_CAP, BuildKeys

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

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
