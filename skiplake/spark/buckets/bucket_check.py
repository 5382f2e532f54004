"""Checking that every row of a bucketed table's files is in the bucket its file's name says.

One Spark job reads only the bucket columns of every file (Parquet's column pruning) and
counts, per file, the rows whose `pmod(hash(columns), n)` (the expression Spark's `bucketBy`
writes with) differs from the id Spark's bucketed scan reads from the file's name. Only files
with such rows come back to the driver.
"""
from __future__ import annotations

from typing import Sequence

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from skiplake.layout.bucket_spec import SPARK_BUCKET_NAME, BucketSpec
from skiplake.log.actions import AddFile
from skiplake.log.paths import file_key
from skiplake.log.schema import Schema
from skiplake.spark.reads.planned_reads import FILE_COLUMN, read_files, spark_file_key

_NAME_COLUMN = "__skiplake_file_name"


def misplaced_rows(spark: SparkSession, table_path: str, schema: Schema, partition_columns: list[str],
                   files: Sequence[AddFile], spec: BucketSpec) -> dict[str, int]:
    """{log path: rows in another bucket than its name's id} for the files holding such rows."""
    if not files:
        return {}
    df = read_files(spark, table_path, schema, partition_columns, files, with_file_info=True,
                    file_column=_NAME_COLUMN)
    named = F.regexp_extract(F.col(_NAME_COLUMN), SPARK_BUCKET_NAME.pattern, 1).cast("int")
    wrong = F.when(F.expr(spec.bucket_sql()) != named, 1).otherwise(0)
    found = (df.select(FILE_COLUMN, _NAME_COLUMN, *[F.col(f"`{c}`") for c in spec.columns])
             .groupBy(FILE_COLUMN).agg(F.sum(wrong).alias("n")).where("n > 0").collect())
    by_key = {file_key(table_path, f.path): f.path for f in files}
    return {by_key.get(spark_file_key(r[FILE_COLUMN]), r[FILE_COLUMN]): int(r["n"]) for r in found}
