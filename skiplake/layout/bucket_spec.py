"""A table's bucketing: the spec kept in the table's configuration, and bucket ids in file names and tags.

Delta has no bucketing, so skiplake keeps the spec under its own configuration keys (Delta
readers ignore keys outside `delta.`) and marks every data file twice: its add action's tags
carry BUCKET_ID (what planning reads) and its name carries Spark's `_%05d` suffix (what Spark's
bucketed scan reads, `BucketingUtils.getBucketId`).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Sequence

from skiplake.errors import InvalidArgumentError
from skiplake.layout.bucketing import is_hashable
from skiplake.log.schema import Schema

if TYPE_CHECKING:
    from skiplake.log.actions import AddFile

NUM_BUCKETS_KEY = "skiplake.bucketing.numBuckets"
COLUMNS_KEY = "skiplake.bucketing.columns"
SORT_COLUMNS_KEY = "skiplake.bucketing.sortColumns"
BUCKET_TAG = "BUCKET_ID"
# Spark refuses more (spark.sql.sources.bucketing.maxBuckets defaults to 100,000).
MAX_BUCKETS = 100_000
# The hidden column the writer puts each row's bucket id in (a folder level while Spark writes).
BUCKET_COLUMN = "__skiplake_bucket"
# Spark's BucketingUtils: the digits after the last underscore, before the first dot that follows.
SPARK_BUCKET_NAME = re.compile(r".*_(\d+)(?:\..*)?$")


@dataclass(frozen=True)
class BucketSpec:
    """Hash bucketing of a table: rows go to bucket pmod(murmur3(columns, seed 42), num_buckets),
    exactly as Spark's bucketBy places them; files of a bucket are sorted by sort_by."""
    num_buckets: int
    columns: Sequence[str]
    sort_by: Sequence[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        """`columns` and `sort_by` as tuples (a lone name as a one-name tuple); InvalidArgumentError for
        anything but column names."""
        # Lists are accepted for convenience; tuples keep the spec hashable and immutable.
        for name in ("columns", "sort_by"):
            value = getattr(self, name)
            names = [value] if isinstance(value, str) else value
            if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
                raise InvalidArgumentError(f"BucketSpec.{name} must be a column name or a list of names, "
                                           f"not {value!r}")
            object.__setattr__(self, name, tuple(names))

    def bucket_sql(self) -> str:
        """A row's bucket as a Spark SQL expression: what Spark's bucketBy writes with."""
        return f"pmod(hash({', '.join(f'`{c}`' for c in self.columns)}), {self.num_buckets})"

    def to_configuration(self) -> dict[str, str]:
        """The spec as the configuration keys it is kept under (bucket_spec_of reads it back)."""
        out = {NUM_BUCKETS_KEY: str(self.num_buckets), COLUMNS_KEY: json.dumps(list(self.columns))}
        if self.sort_by:
            out[SORT_COLUMNS_KEY] = json.dumps(list(self.sort_by))
        return out

    def resolved(self, table_path: str, schema: Schema, partition_columns: Sequence[str]) -> "BucketSpec":
        """This spec with column names spelled as in the schema; a clear error when it cannot be."""
        n: object = self.num_buckets   # as the caller passed it (typed or not): checked here, not trusted
        if not isinstance(n, int) or isinstance(n, bool) or not 0 < n <= MAX_BUCKETS:
            raise InvalidArgumentError(
                f"{table_path}: BucketSpec.num_buckets must be an integer from 1 to {MAX_BUCKETS:,}, not {n!r}")
        if not self.columns:
            raise InvalidArgumentError(f"{table_path}: BucketSpec.columns names no column; bucket by at least one")
        parts = {p.lower() for p in partition_columns}

        def resolve(names: Sequence[str], role: str) -> tuple[str, ...]:
            out: list[str] = []
            for name in names:
                f = schema.find(name)
                if f is None:
                    raise InvalidArgumentError(
                        f"{table_path}: {role} column {name!r} is not in the schema "
                        f"(columns: {', '.join(schema.names)})")
                if f.name.lower() in parts:
                    raise InvalidArgumentError(
                        f"{table_path}: {role} column {f.name!r} is a partition column; every row of a "
                        "partition has the same value, so bucket or sort by other columns")
                if f.name in out:
                    raise InvalidArgumentError(f"{table_path}: {role} column {f.name!r} is named twice")
                if not is_hashable(f.type):
                    shown = f.type if isinstance(f.type, str) else f.type.get("type")
                    raise InvalidArgumentError(
                        f"{table_path}: {role} column {f.name!r} has type {shown}; {role} by a column of an "
                        "atomic type (numbers, strings, binary, booleans, dates, timestamps)")
                out.append(f.name)
            return tuple(out)

        if schema.find(BUCKET_COLUMN) is not None:
            raise InvalidArgumentError(f"{table_path}: a bucketed table cannot have a column named {BUCKET_COLUMN!r} "
                                       "(the writer uses that name for each row's bucket id)")
        return BucketSpec(n, resolve(self.columns, "bucket"), resolve(self.sort_by, "sort"))


def bucket_spec_of(configuration: Mapping[str, str]) -> BucketSpec | None:
    """The table's bucket spec from its configuration (metaData.configuration), or None."""
    if NUM_BUCKETS_KEY not in configuration:
        return None
    try:
        return BucketSpec(int(configuration[NUM_BUCKETS_KEY]), json.loads(configuration[COLUMNS_KEY]),
                          json.loads(configuration.get(SORT_COLUMNS_KEY, "[]")))
    except (KeyError, ValueError, InvalidArgumentError) as e:
        raise InvalidArgumentError(
            f"the table's bucketing properties ({NUM_BUCKETS_KEY}, {COLUMNS_KEY}, {SORT_COLUMNS_KEY}) are "
            f"malformed ({e}); they are written by create_table(bucket_by=...) and must not be edited") from e


def bucket_file_name(name: str, bucket: int) -> str:
    """Spark's name of a bucketed file: `part-00000-<uuid>_00003.c000.snappy.parquet`."""
    stem, dot, rest = name.partition(".")
    return f"{stem}_{bucket:05d}{dot}{rest}"


def bucket_id_from_name(name: str) -> int | None:
    """The bucket id Spark's bucketed scan reads from a file name, or None if it has none."""
    m = SPARK_BUCKET_NAME.match(name.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


def files_without_bucket_ids(files: Sequence["AddFile"], spec: BucketSpec) -> list[str]:
    """Paths of files Spark's bucketed scan could not place: no (numeric) bucket tag, a name
    whose suffix disagrees with it, or an id outside the spec's count."""
    return [f.path for f in files
            if (b := bucket_id_of_tags(f.tags)) is None or bucket_id_from_name(f.path) != b
            or not 0 <= b < spec.num_buckets]


def bucket_id_of_tags(tags: Mapping[str, str | None] | None) -> int | None:
    """A file's bucket id from its add action's tags; None when it has none (or not a number)."""
    value = (tags or {}).get(BUCKET_TAG)
    return int(value) if value is not None and value.isdigit() else None
