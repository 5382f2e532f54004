"""A Parquet table of the Spark session's own catalog (`saveAsTable`): where its files are, its
partition columns and its bucket spec, as `DESCRIBE TABLE EXTENDED ... AS JSON` gives them.

This is how a table written with `df.write.bucketBy(n, cols).sortBy(...).saveAsTable(name)`
tells what its files' bucket ids mean: Spark keeps the spec in the catalog, not in the files.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from pyspark.sql import SparkSession

from skiplake.errors import InvalidArgumentError
from skiplake.layout.bucket_spec import BucketSpec
from skiplake.log.location import from_spark_uri
from skiplake.spark.session.spark_types import from_spark

PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"


@dataclass(frozen=True)
class SessionTable:
    """A table of the session's catalog as a conversion needs it: its folder, provider, partition columns and
    bucket spec."""
    name: str
    location: str
    provider: str
    partition_columns: list[tuple[str, str]]   # (name, Delta type)
    bucket_spec: BucketSpec | None

    @property
    def is_delta(self) -> bool:
        """Whether the catalog says the table is a Delta table already."""
        return self.provider == "delta"


def session_table(spark: SparkSession, name: str) -> SessionTable:
    """The catalog's description of table `name` (as Spark SQL names it: `t`, `db.t`)."""
    try:
        described = json.loads(spark.sql(f"DESCRIBE TABLE EXTENDED {name} AS JSON").collect()[0][0])
        schema = from_spark(spark.table(name).schema)
    except Exception as e:  # Spark's AnalysisException: no such table, a bad name
        raise InvalidArgumentError(f"the session's catalog has no table {name!r} to convert: "
                                   f"{str(e).splitlines()[0]}") from None
    provider = str(described.get("provider") or "").lower()
    serde = str(described.get("serde_library") or "")
    if described.get("type") == "VIEW":
        raise InvalidArgumentError(f"{name} is a view; convert the Parquet table it reads instead")
    if provider not in ("parquet", "delta") and not (provider == "hive" and serde == PARQUET_SERDE):
        raise InvalidArgumentError(f"{name} is a {provider or 'non-file'} table; only Parquet tables convert in place")
    location = described.get("location")
    if not location:
        raise InvalidArgumentError(f"{name} has no location in the catalog, so it has no folder to convert")
    parts = [(c, schema.field(c).type) for c in described.get("partition_columns") or []]
    spec = None
    if described.get("num_buckets"):
        spec = BucketSpec(int(described["num_buckets"]), list(described.get("bucket_columns") or []),
                          list(described.get("sort_columns") or []))
    return SessionTable(name, from_spark_uri(location), provider, parts, spec)
