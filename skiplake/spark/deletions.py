"""Dropping the rows deletion vectors mark, inside Spark: no per-row Python, no JVM code of ours.

A file with a deletion vector is read by Spark's own Parquet reader like any other, with two
hidden columns from `_metadata`: the file's path and each row's index in it (its physical
position, which Spark computes correctly with file splits and filter pushdown).

The deleted rows, read from the DVs in the driver, go to Spark as bitmaps: one row per (file,
block of 4,096 row indexes) that has deletions, holding the block's 4,096 bits as 64 longs. A
scanned row finds its block's bitmap by a broadcast join on one long key, and is kept unless its
bit is set. The key is the high 36 bits of Spark's xxhash64 of the file's path plus the block
number; the driver checks (with Spark's own hash) that no two of the read's files share those
bits, and joins on (path, block) instead if two do: never a wrong row. The bitmaps are small
(for 20M rows with 10% deleted, some 5,000 rows of 512 bytes), so the join's hash table stays in
cache, and no string is hashed into it per row. (A join on (file, row index) pairs, the first
design, built a table of every deleted row and made a full scan with 10% deleted 5x slower than
over rewritten files; benchmark 13.)

Files without a DV never pass through this: the caller reads them apart (see skiplake.spark.read).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

PATH_COLUMN = "__skiplake_dv_path"
ROW_COLUMN = "__skiplake_dv_row"
BLOCK_BITS = 12                      # 4,096 rows per bitmap: 64 longs
_WORDS = 1 << (BLOCK_BITS - 6)
KEY_BITS = 28                        # a key's low bits hold the block number (2^40 rows per file)
_HIGH = -(1 << KEY_BITS)             # the hash bits a key keeps
_KEY, _BLOCK, _BITS, _ORDINAL = "__skiplake_dv_key", "__skiplake_dv_block", "__skiplake_dv_bits", "__skiplake_dv_file"


def without_deleted(spark: SparkSession, df: DataFrame, spark_paths: Sequence[str],
                    deleted: Sequence[np.ndarray]) -> DataFrame:
    """`df` (rows of files with deletion vectors, with PATH_COLUMN = `_metadata.file_path` and
    ROW_COLUMN = `_metadata.row_index`) without the rows `deleted[i]` (row indexes) marks in the
    file Spark names `spark_paths[i]`; the two columns are dropped."""
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
    marked = F.expr(f"shiftright(__skiplake_dv_word, CAST({ROW_COLUMN} & 63 AS INT)) & 1 = 1")
    kept = joined.withColumn("__skiplake_dv_word", word).filter(F.col(_BITS).isNull() | ~marked)
    return kept.select(*[F.col(f"`{c}`") for c in df.columns if c not in (PATH_COLUMN, ROW_COLUMN)])


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
