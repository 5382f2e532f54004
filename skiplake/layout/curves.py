"""Z-order and Hilbert clustering: map rows to a position on a space-filling curve over several columns.

Each column's values are first replaced by a *range id*: the rank of the value's range among
equal-frequency ranges cut from a sample (what Delta does with its range-partition ids). Ranks
rather than raw bits because raw values waste the curve on what the data does not use: a
column of dates spans a few thousand days in a 32-bit integer, a string's first bytes are
mostly the same letters, and skew piles rows into a few cells. Ranks give every column the same
number of bits, spread evenly over the rows actually there, for every type Spark can sort.
The Z-value interleaves the ranks' bits, most significant first, so rows close in every column
are close on the curve; cutting the curve into consecutive runs gives files that each cover a
small box of the column space, which is what min/max stats can then skip. The Hilbert curve
(liquid clustering's, as in delta-spark) visits the same cells in an order where consecutive
cells are always neighbours, so a run of it never jumps across the space the way a Z-curve does
at each power of two: its files' boxes are tighter for the same number of files.

NULL gets range id 0 (Spark sorts NULLs first). Everything here is NumPy/Arrow, no Spark: the
Spark job (`skiplake.spark.optimize.curve_rewrite`) calls these on each batch of rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skiplake.layout.sortable import sortable

MAX_RANGES = 1024          # ranges per column when there is one column; fewer bits each with more
ZVALUE_BITS = 62           # Z-values are non-negative int64s (Spark sorts them signed)

# Tags on the add action of every file an OPTIMIZE ZORDER BY wrote (Databricks' names): a second
# OPTIMIZE with the same columns leaves these files alone.
ZCUBE_ID = "ZCUBE_ID"
ZCUBE_ZORDER_BY = "ZCUBE_ZORDER_BY"
ZCUBE_ZORDER_CURVE = "ZCUBE_ZORDER_CURVE"


def bits_per_column(num_columns: int) -> int:
    """Bits of range id per column: log2(MAX_RANGES), fewer when all columns' bits would not fit a Z-value's 62."""
    return max(1, min(int(np.log2(MAX_RANGES)), ZVALUE_BITS // max(1, num_columns)))


def range_boundaries(sample: pa.Array, num_ranges: int) -> np.ndarray:
    """Up to num_ranges - 1 increasing cut points splitting the sample's non-null values evenly."""
    values = sample.filter(sample.is_valid()) if sample.null_count else sample
    if len(values) == 0 or num_ranges <= 1:
        return sortable(pa.array([], type=sample.type))[:0]
    ordered = np.sort(sortable(values), kind="stable")
    positions = (np.arange(1, num_ranges) * len(ordered)) // num_ranges
    return np.unique(ordered[positions])


def range_ids(values: pa.Array, boundaries: np.ndarray) -> np.ndarray:
    """Range id of each value: 0 for NULL, else 1 + the number of boundaries <= value."""
    ids = np.searchsorted(boundaries, sortable(values), side="right").astype(np.uint64) + 1
    if values.null_count:
        ids[np.asarray(values.is_null())] = 0
    return ids


def interleave(ids: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """Z-values: bit b of column c lands at position (bits - 1 - b) * len(ids) + c from the top."""
    k = len(ids)
    n = len(ids[0]) if k else 0
    z = np.zeros(n, dtype=np.uint64)
    for b in range(bits - 1, -1, -1):
        for c in range(k):
            z = (z << np.uint64(1)) | ((ids[c] >> np.uint64(b)) & np.uint64(1))
    return z.astype(np.int64)


def hilbert(ids: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """Hilbert indexes of points whose coordinates are `bits`-bit integers, one array per axis.

    Skilling's transpose method ("Programming the Hilbert curve", 2004): the coordinates are
    turned, bit plane by bit plane from the top, into the transposed form of the index, whose
    bits interleaved (axis 0 first) are the index. Vectorised over the points."""
    x = [np.asarray(a, dtype=np.uint64).copy() for a in ids]
    n = len(x)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    q = np.uint64(1 << (bits - 1))
    while q > 1:
        p = q - np.uint64(1)
        for i in range(n):
            high = (x[i] & q) != 0
            swap = np.where(high, np.uint64(0), (x[0] ^ x[i]) & p)
            x[0] = np.where(high, x[0] ^ p, x[0] ^ swap)
            if i:
                x[i] = x[i] ^ swap
        q >>= np.uint64(1)
    for i in range(1, n):
        x[i] = x[i] ^ x[i - 1]
    t = np.zeros(len(x[0]), dtype=np.uint64)
    q = np.uint64(1 << (bits - 1))
    while q > 1:
        t = np.where((x[n - 1] & q) != 0, t ^ (q - np.uint64(1)), t)
        q >>= np.uint64(1)
    return interleave([xi ^ t for xi in x], bits)


CURVES = ("zorder", "hilbert")


@dataclass(frozen=True)
class Curve:
    """What every task needs to place a row on the curve: per column, its range boundaries."""
    columns: tuple[str, ...]
    boundaries: tuple[np.ndarray, ...]
    bits: int
    kind: str = "zorder"     # or "hilbert"

    @staticmethod
    def from_sample(sample: pa.Table, columns: Sequence[str], kind: str = "zorder") -> "Curve":
        """The `kind` curve ("zorder" or "hilbert") over `columns`, each cut into ranges from `sample`'s
        values; ValueError for another kind."""
        if kind not in CURVES:
            raise ValueError(f"unknown curve {kind!r}; one of {CURVES}")
        bits = bits_per_column(len(columns))
        # Range ids run 0 (NULL) .. len(boundaries) + 1, so at most 2**bits - 2 cut points.
        num_ranges = (1 << bits) - 1
        bounds = tuple(range_boundaries(sample.column(c).combine_chunks(), num_ranges) for c in columns)
        return Curve(tuple(columns), bounds, bits, kind)

    def zvalues(self, batch: pa.RecordBatch | pa.Table) -> np.ndarray:
        """Each row's position on the curve."""
        ids = []
        for c, bounds in zip(self.columns, self.boundaries):
            col = batch.column(c)
            ids.append(range_ids(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col, bounds))
        return hilbert(ids, self.bits) if self.kind == "hilbert" else interleave(ids, self.bits)


def cut_points(zvalues: np.ndarray, num_files: int) -> np.ndarray:
    """num_files - 1 cut points that split sample Z-values into runs of equal size."""
    if num_files <= 1 or len(zvalues) == 0:
        return np.zeros(0, dtype=np.int64)
    ordered = np.sort(zvalues)
    positions = (np.arange(1, num_files) * len(ordered)) // num_files
    return ordered[positions]


def partition_keys(batch: pa.RecordBatch | pa.Table, columns: Sequence[str]) -> pa.Array:
    """One string per row naming its partition, the same for the driver's sample and the tasks."""
    if not columns:
        return pa.array([""] * batch.num_rows, pa.string())
    parts = []
    for c in columns:
        col = batch.column(c)
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        parts.append(pc.fill_null(pc.cast(col, pa.string()), "\x00"))
    return parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "\x1f")
