"""Parquet footers of many files, read by a Spark job: for directories too large for the driver.

The driver reads footers itself with a few threads (skiplake.log.stats.read_footers), which is
quickest until the files are many or the store's latency is high. Past a threshold the reads
go to the executors instead: each task reads the footers of its files and returns their bytes,
and the driver parses them (a footer is a few KiB) and computes stats as it does for its own
reads, one batch of files at a time.

The function the executors run is self-contained: it imports only pyarrow and the standard
library, never skiplake, so the executors of a cluster need pyarrow (which PySpark's Arrow
features need anyway) and access to the files: the same path for local or network file
systems, and for s3:// tables either the credentials the driver uses for the bucket (passed to
the tasks, as Hadoop's S3A settings are) or the executors' own AWS credential chain.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence, TypeAlias

import pyarrow as pa
import pyarrow.parquet as pq

from skiplake.log.location import bucket_and_key, is_remote
from skiplake.log.s3 import connection_for
from skiplake.spark.session.setting_values import conf_count

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

THRESHOLD_CONF = "spark.skiplake.convert.footerJobThreshold"
DEFAULT_THRESHOLD = 5_000        # files; below it the driver reads the footers itself
BATCH_FILES = 10_000             # files per Spark job: bounds the footers the driver holds at once
FILES_PER_TASK = 64
MAGIC = b"PAR1"
TAIL_BYTES = 64 * 1024           # one read gets the footer of most files

Footer: TypeAlias = pq.FileMetaData | Exception
# What RDD.mapPartitions takes: a partition's items in, any iterable of results out.
Reader = Callable[[Iterable[tuple[int, str]]], Iterable[tuple[int, bytes | None, str | None]]]


def job_threshold(spark: "SparkSession", given: int | None = None) -> int:
    """The number of files from which footers are read by a Spark job (`given`, else the setting)."""
    if given is not None:
        return given
    return conf_count(THRESHOLD_CONF, spark.conf.get(THRESHOLD_CONF, None), DEFAULT_THRESHOLD)


def footer_reader(s3_options: dict[str, str]) -> Reader:
    """The executor function: (index, path) pairs to (index, footer bytes, error). It closes over
    plain values only, so cloudpickle ships it whole and the executors never import skiplake."""

    def read(items: Iterable[tuple[int, str]]) -> Iterator[tuple[int, bytes | None, str | None]]:
        import pyarrow.fs as pafs

        local = pafs.LocalFileSystem()
        s3 = None
        for index, path in items:
            try:
                if path.startswith(("s3://", "s3a://")):
                    if s3 is None:
                        s3 = pafs.S3FileSystem(**s3_options)
                    fs, where = s3, path.split("://", 1)[1]
                else:
                    fs, where = local, path
                with fs.open_input_file(where) as f:
                    size = f.size()
                    tail = min(size, TAIL_BYTES)
                    f.seek(size - tail)
                    data = f.read(tail)
                    if size < 12 or data[-4:] != MAGIC:
                        yield index, None, "not a Parquet file (it does not end with the PAR1 marker)"
                        continue
                    length = int.from_bytes(data[-8:-4], "little")
                    if length + 8 > size:
                        yield index, None, "not a Parquet file (its footer length is past its start)"
                        continue
                    if length + 8 <= tail:
                        footer = data[tail - 8 - length:tail - 8]
                    else:
                        f.seek(size - 8 - length)
                        footer = f.read(length)
                yield index, footer, None
            except Exception as e:  # reported per file: the driver names every unreadable one
                yield index, None, f"{type(e).__name__}: {e}"

    return read


def parse_footer(footer: bytes) -> pq.FileMetaData:
    """A footer's bytes as pyarrow's FileMetaData (framed as a file holding only the footer)."""
    framed = MAGIC + footer + len(footer).to_bytes(4, "little") + MAGIC
    return pq.read_metadata(pa.BufferReader(framed))


def s3_options_for(path: str) -> dict[str, str]:
    """pyarrow.fs.S3FileSystem arguments that reach the bucket of `path` as the driver's client
    does: its endpoint, region and credentials (one set, from one source)."""
    if not is_remote(path):
        return {}
    c = connection_for(bucket_and_key(path)[0])
    out = {arg: value for arg, value in (("access_key", c.access_key), ("secret_key", c.secret_key),
                                         ("session_token", c.session_token), ("region", c.region)) if value}
    if c.endpoint:
        scheme, sep, rest = c.endpoint.partition("://")
        out["endpoint_override"] = rest.rstrip("/") if sep else c.endpoint
        out["scheme"] = scheme if sep else "https"
    return out


def read_footers_by_job(spark: "SparkSession", paths: Sequence[str]) -> Iterator[tuple[int, Footer]]:
    """(index, footer or the reason it could not be read) for every path, by Spark jobs of at
    most BATCH_FILES files each; order within a batch is the tasks'."""
    sc = spark.sparkContext
    reader = footer_reader(s3_options_for(paths[0]) if paths else {})
    for start in range(0, len(paths), BATCH_FILES):
        batch = [(i, paths[i]) for i in range(start, min(start + BATCH_FILES, len(paths)))]
        slices = max(1, min(len(batch) // FILES_PER_TASK + 1, sc.defaultParallelism * 4))
        for index, footer, error in sc.parallelize(batch, slices).mapPartitions(reader).collect():
            if footer is None:
                yield index, OSError(error)
                continue
            try:
                yield index, parse_footer(footer)
            except (OSError, pa.ArrowException) as e:
                yield index, e
