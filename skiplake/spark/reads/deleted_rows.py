"""Dropping the rows deletion vectors mark, inside Spark: no per-row Python, no JVM code of ours.

A file with a deletion vector is read by Spark's own Parquet reader like any other, with hidden
columns from `_metadata`: each row's index in its file (its physical position, which Spark
computes correctly with file splits and filter pushdown), the file's size and its path.

The deleted rows, read from the DVs in the driver, go to Spark as one bitmap per file (bit r of
the file's words for row r, up to its last deleted row) in a scalar subquery, which a query holds
as a value (its plan prints it by name only). A row finds its file's bitmap with no join and no
hash: the driver picks the smallest m for which the read's distinct file sizes all leave
different remainders, and `size % m` is the bitmap's slot. Files that share a size with another
(small files of similar rows often do) are found by their path instead, among themselves only. A
row's slot also holds its file's logged size: a data file whose size is not the logged one fails
the read rather than take another file's bitmap. Per row that is an integer remainder, two or
three array lookups and a bit test.

Past its bounds (more than 128 distinct sizes, 32 files sharing sizes, or 8 MB of bitmaps) the
read falls back to a broadcast join: one row per (file, block of 4,096 row indexes) that has
deletions, holding the block's bits as 64 longs, keyed by the high 36 bits of Spark's xxhash64 of
the file's path plus the block number (the driver checks that no two of the read's files share
those bits, and joins on (path, block) if two do: never a wrong row). Hashing each row's path
string is the dearer part of that way (`benchmarks.bench_dv --layers` measures each layer; the
figures are in docs/benchmarks.md). A join on (file, row index) pairs, the first design, built a
table of every deleted row and made full scans many times slower than over rewritten files.

Files without a DV never pass through this: the caller reads them apart (see skiplake.spark.reads.planned_reads).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

PATH_COLUMN = "__skiplake_dv_path"
ROW_COLUMN = "__skiplake_dv_row"
SIZE_COLUMN = "__skiplake_dv_size"
BLOCK_BITS = 12                      # 4,096 rows per bitmap: 64 longs
_WORDS = 1 << (BLOCK_BITS - 6)
KEY_BITS = 28                        # a key's low bits hold the block number (2^40 rows per file)
_HIGH = -(1 << KEY_BITS)             # the hash bits a key keeps
_KEY, _BLOCK, _BITS, _ORDINAL = "__skiplake_dv_key", "__skiplake_dv_block", "__skiplake_dv_bits", "__skiplake_dv_file"
_SIZES, _PATHS, _WORD = "__skiplake_dv_sizes", "__skiplake_dv_paths", "__skiplake_dv_word"
# Bounds of the join-free path: files of one read (with more, a table of 2^16 slots seldom tells
# their sizes apart by remainder), slots of that table, and the int64 words of the bitmaps it ships
# whole with the query (8 MB: 2^26 rows of files with deletion vectors).
MAX_FILES = 128
MAX_SLOTS = 1 << 16
MAX_WORDS = 1 << 20
# Files that share their size with another, found by their path: a linear search among them.
MAX_SHARED = 32


def without_deleted(spark: SparkSession, df: DataFrame, spark_paths: Sequence[str],
                    deleted: Sequence[np.ndarray], sizes: Sequence[int] | None = None) -> DataFrame:
    """`df` (rows of files with deletion vectors, with PATH_COLUMN = `_metadata.file_path`,
    ROW_COLUMN = `_metadata.row_index` and SIZE_COLUMN = `_metadata.file_size`) without the rows
    `deleted[i]` (row indexes) marks in the file Spark names `spark_paths[i]`, whose size the log
    gives as `sizes[i]`; the three columns are dropped. Without sizes, by the join."""
    kept = _by_size(df, spark_paths, sizes, deleted) if sizes is not None else None
    if kept is None:
        kept = _joined(spark, df, spark_paths, deleted)
    # drop takes names as they are, in one call (a select would make a Column per column).
    return kept.drop(PATH_COLUMN, ROW_COLUMN, SIZE_COLUMN, _KEY, _BLOCK, _BITS, _SIZES, _PATHS, _WORD)


def _layout(size_of: np.ndarray, shared: np.ndarray, slots: int, words: list[np.ndarray],
            spark_paths: Sequence[str]) -> tuple[list[np.ndarray | None], np.ndarray, dict[str, int]]:
    """(the bitmaps' entries, each slot's logged size, the entry of each file that shares its
    size, by path). Entries are one per slot (the file whose size alone falls there), then one
    per file that shares its size; a slot's logged size says which: the size, or -1 - size."""
    n = len(size_of)
    entries: list[np.ndarray | None] = [None] * (slots + len(shared))
    logged = np.full(slots, np.iinfo(np.int64).min, np.int64)
    for i in range(n):
        logged[size_of[i] % slots] = size_of[i]
    by_path = {}
    for j, i in enumerate(shared.tolist()):
        logged[size_of[i] % slots] = -1 - size_of[i]
        by_path[spark_paths[i]] = slots + j
        entries[slots + j] = words[i]
    for i in np.setdiff1d(np.arange(n), shared).tolist():
        entries[size_of[i] % slots] = words[i]
    return entries, logged, by_path


def _by_size(df: DataFrame, spark_paths: Sequence[str], sizes: Sequence[int],
             deleted: Sequence[np.ndarray]) -> DataFrame | None:
    """The rows `deleted` does not mark, a row's bitmap found by its file's size (by its path
    among the few files that share a size); None past the bounds of this way."""
    n = len(sizes)
    if not n or len(deleted) != n or len(spark_paths) != n:
        return None
    size_of = np.asarray(sizes, np.int64)
    distinct, counts = np.unique(size_of, return_counts=True)
    shared = np.flatnonzero(counts[np.searchsorted(distinct, size_of)] > 1)
    slots = _slots(distinct) if len(shared) <= MAX_SHARED else None
    if slots is None:
        return None
    words = [_whole_bitmap(np.asarray(rows, np.uint64)) for rows in deleted]
    if sum(len(w) for w in words) > MAX_WORDS:
        return None
    entries, logged, by_path = _layout(size_of, shared, slots, words, spark_paths)
    # Scalar subqueries: the query holds the arrays as values (its plan prints them by name
    # only), and a row finds its word by array lookups, with no join and no hash. One apiece,
    # not one struct of the three: a field of a struct would be taken out again for every row.
    payload = df.sparkSession.createDataFrame(pa.table({
        _BITS: pa.ListArray.from_arrays(pa.array([0, len(entries)], pa.int32()), _nested(entries)),
        _SIZES: pa.array([logged], pa.list_(pa.int64())),
        _PATHS: pa.array([list(by_path.items())], pa.map_(pa.string(), pa.int32()))}))
    # The paths only where files share a size: else the filter never reads them.
    values = {c: payload.select(c).scalar() for c in (_BITS, _SIZES) + ((_PATHS,) if by_path else ())}
    # The filter as one SQL expression, parsed once (built from Columns, it took some forty calls
    # into the JVM), over the values as columns: the optimizer puts each value in its place when
    # it pushes the filter below them, and drops the columns.
    size, row, path = f"`{SIZE_COLUMN}`", f"`{ROW_COLUMN}`", f"`{PATH_COLUMN}`"
    bitmaps, at, paths = (f"`{c}`" for c in (_BITS, _SIZES, _PATHS))
    slot = f"CAST({size} % {slots} AS INT)"
    entry = f"CASE WHEN get({at}, {slot}) = {size} THEN {slot}"
    if by_path:  # else the path is not read at all
        unknown_path = _fail("the path", path)
        entry += f" WHEN get({at}, {slot}) = -1 - {size} THEN coalesce(element_at({paths}, {path}), {unknown_path})"
    # A file whose size is not the logged one would take another file's entry: fail the read.
    entry += f" ELSE {_fail('the size', size)} END"
    # A row past 2^37 (no Parquet file has so many) asks for a word past every bitmap: kept.
    word = f"get(get({bitmaps}, {entry}), CAST(least(shiftright({row}, 6), {(1 << 31) - 1}) AS INT))"
    # One expression, no column defined above the filter for a part of it: Spark would inline
    # such a column into every use and evaluate each copy per row.
    kept = f"shiftright(coalesce({word}, 0L), CAST({row} & 63 AS INT)) & 1 = 0"
    return df.withColumns(values).filter(F.expr(kept))


def _fail(what: str, column: str) -> str:
    """SQL that fails the read, naming the file's `column` (its path or its size)."""
    return (f"raise_error(concat('deletion vectors: {what} of a data file with one, ', "
            f"CAST({column} AS STRING), ', is not what the log says of any file of the read'))")


def _nested(entries: Sequence[np.ndarray | None]) -> pa.Array:
    """Arrow's list<int64> of the entries (None: null, no row marked)."""
    lengths = np.array([0 if e is None else len(e) for e in entries], np.int32)
    offsets = np.zeros(len(entries) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    present = [e for e in entries if e is not None]
    values = np.concatenate(present) if present else np.zeros(0, np.int64)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, pa.int64()),
                                    mask=pa.array([e is None for e in entries]))


def _slots(sizes: np.ndarray) -> int | None:
    """The smallest m (at most MAX_SLOTS) for which distinct sizes' remainders mod m all differ:
    a perfect hash of the read's file sizes; None if there is none, or too many sizes."""
    n = len(sizes)
    if n > MAX_FILES:
        return None
    for first in range(n, MAX_SLOTS + 1, 256):
        ms = np.arange(first, min(first + 256, MAX_SLOTS + 1), dtype=np.int64)
        remainders = np.sort(sizes[None, :] % ms[:, None], axis=1)
        distinct = (np.diff(remainders, axis=1) != 0).all(axis=1)
        if distinct.any():
            return int(ms[np.argmax(distinct)])
    return None


def _whole_bitmap(rows: np.ndarray) -> np.ndarray:
    """The bits of row indexes (sorted, unique) as int64 words, bit r % 64 of word r // 64, up to
    the word of the last one."""
    if not len(rows):
        return np.zeros(0, np.int64)
    bits = np.zeros((int(rows[-1]) // 64 + 1) * 64, bool)
    bits[rows.astype(np.int64)] = True
    return np.packbits(bits, bitorder="little").view("<i8").astype(np.int64, copy=False)


def _joined(spark: SparkSession, df: DataFrame, spark_paths: Sequence[str], deleted: Sequence[np.ndarray]) -> DataFrame:
    """The rows `deleted` does not mark, through a broadcast join to 4,096-row bitmaps."""
    ordinals, blocks, bits = _bitmaps(deleted)
    paths = spark.createDataFrame(pa.table({PATH_COLUMN: pa.array(list(spark_paths), pa.string()),
                                            _ORDINAL: pa.array(range(len(spark_paths)), pa.int64())}))
    hashes = {r[0]: r[1] for r in paths.select(_ORDINAL, F.xxhash64(PATH_COLUMN)).collect()}
    high = [hashes[o] & _HIGH for o in range(len(spark_paths))]
    row = F.col(ROW_COLUMN)
    block = F.shiftright(row, BLOCK_BITS)
    if len(set(high)) == len(high):
        table = pa.table({_KEY: pa.array([high[o] + b for o, b in zip(ordinals.tolist(), blocks.tolist())], pa.int64()),
                          _BITS: bits})
        keyed = df.withColumn(_KEY, F.xxhash64(PATH_COLUMN).bitwiseAND(F.lit(_HIGH)) + block)
        joined = keyed.join(F.broadcast(spark.createDataFrame(table)), _KEY, "left")
    else:
        table = pa.table({_ORDINAL: pa.array(ordinals, pa.int64()), _BLOCK: pa.array(blocks, pa.int64()), _BITS: bits})
        by_path = spark.createDataFrame(table).join(paths, _ORDINAL).drop(_ORDINAL)
        joined = df.withColumn(_BLOCK, block).join(F.broadcast(by_path), [PATH_COLUMN, _BLOCK], "left")
    word = F.element_at(F.col(_BITS), (F.shiftright(row, 6).bitwiseAND(F.lit(_WORDS - 1)) + 1).cast("int"))
    marked = F.expr(f"shiftright({_WORD}, CAST({ROW_COLUMN} & 63 AS INT)) & 1 = 1")
    return joined.withColumn(_WORD, word).filter(F.col(_BITS).isNull() | ~marked)


def _bitmaps(deleted: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, pa.Array]:
    """(file ordinal, block number, the block's 64 words) of every block with a deleted row."""
    ordinals, blocks, words = [], [], []
    for ordinal, rows in enumerate(deleted):
        rows = np.asarray(rows, dtype=np.uint64)
        if not len(rows):
            continue
        if int(rows[-1]) >= 1 << (BLOCK_BITS + KEY_BITS):
            raise ValueError(f"a deletion vector marks row {int(rows[-1])}, past the "
                             f"{1 << (BLOCK_BITS + KEY_BITS)} rows of a file")
        block = (rows >> np.uint64(BLOCK_BITS)).astype(np.int64)
        unique = np.unique(block)
        within = (rows & np.uint64((1 << BLOCK_BITS) - 1)).astype(np.int64)
        w = np.zeros((len(unique), _WORDS), dtype=np.uint64)
        np.bitwise_or.at(w, (np.searchsorted(unique, block), within >> 6),
                         np.left_shift(np.uint64(1), (within & 63).astype(np.uint64)))
        ordinals.append(np.full(len(unique), ordinal, np.int64))
        blocks.append(unique)
        words.append(w.view(np.int64))
    if not words:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), pa.array([], pa.list_(pa.int64()))
    flat = np.concatenate(words)
    offsets = pa.array(np.arange(0, flat.size + 1, _WORDS, dtype=np.int32))
    return np.concatenate(ordinals), np.concatenate(blocks), pa.ListArray.from_arrays(offsets, pa.array(flat.ravel()))


def as_metadata_path(input_file: str) -> str:
    """A path as `DataFrame.inputFiles()` gives it, as `_metadata.file_path` gives it: the same
    encoded URI, but a local file's empty authority is `file:///` in one and `file:/` in the other."""
    return "file:/" + input_file[len("file:///"):] if input_file.startswith("file:///") else input_file
