"""The checks a table's definition passes before its first commit (create, convert) or a change
of its properties: partition columns, table properties, column mapping. Each refusal is an
error naming the table, raised before anything is written."""
from __future__ import annotations

from typing import Mapping, Sequence

from skiplake.errors import InvalidArgumentError, SchemaMismatchError
from skiplake.layout.bucket_spec import BucketSpec
from skiplake.layout.partitioning import check_partition_types
from skiplake.log.column_mapping import configure
from skiplake.log.schema import Schema
from skiplake.log.stats import stats_settings
from skiplake.txn.constraints import refuse_constraint_properties
from skiplake.txn.isolation import check_isolation_property
from skiplake.txn.row_tracking import with_column_names

_BUCKETING_PREFIX = "skiplake.bucketing."


def partition_columns(path: str, schema: Schema, partition_by: Sequence[str] | None) -> list[str]:
    """The partition columns as the schema spells them; each must be a column of a type with a
    folder encoding, and at least one column must be left for the data."""
    parts = [schema.field(c).name if schema.find(c) else c for c in (partition_by or [])]
    missing = [c for c in parts if schema.find(c) is None]
    if missing:
        raise SchemaMismatchError(path, [f"partition column {c!r} is not in the schema" for c in missing],
                                  "Partition by columns of the schema.")
    check_partition_types(path, schema, parts)
    if len(parts) == len(schema.fields) and parts:
        raise InvalidArgumentError(f"{path}: a table needs at least one column that is not a partition column")
    return parts


def table_properties(path: str, properties: Mapping[str, str] | None, bucket_by: BucketSpec | None) -> dict[str, str]:
    """metaData.configuration of a new table from its properties, checked; the bucket spec, given
    apart, is the caller's to add once it is resolved against the schema."""
    config = {k: str(v) for k, v in (properties or {}).items()}
    refuse_bucketing_properties(path, config, "give the bucketing as bucket_by=BucketSpec(...)")
    refuse_constraint_properties(path, config)
    if bucket_by is not None and not isinstance(bucket_by, BucketSpec):
        raise InvalidArgumentError(f"{path}: bucket_by must be a skiplake.BucketSpec, not {type(bucket_by)}")
    check_properties(path, config)
    return with_column_names(config)


def refuse_bucketing_properties(path: str, properties: Mapping[str, str], how: str) -> None:
    """The bucket spec's keys are skiplake's to write, from a BucketSpec."""
    reserved = sorted(k for k in properties if k.startswith(_BUCKETING_PREFIX))
    if reserved:
        raise InvalidArgumentError(f"{path}: {how}, not as properties {reserved}")


def check_properties(path: str, config: Mapping[str, str]) -> None:
    """Refuse an isolation level or stats settings that every later commit would fail on."""
    check_isolation_property(config)
    try:
        stats_settings(config)
    except ValueError as e:
        raise InvalidArgumentError(f"{path}: {e}") from None


def with_column_mapping(path: str, schema: Schema, config: dict[str, str], current: str, new_table: bool,
                        bucketed: bool) -> tuple[Schema, dict[str, str]]:
    """The schema and configuration with the column mapping the properties ask for."""
    try:
        mapped, config = configure(schema, config, current, new_table)
    except ValueError as e:
        raise InvalidArgumentError(f"{path}: {e}") from None
    if mapped is not schema and bucketed:
        # The bucketed writer hashes columns by the names the spec gives, which the files would not use.
        raise InvalidArgumentError(f"{path}: a bucketed table cannot take column mapping in this release")
    return mapped, config
