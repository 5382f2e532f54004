"""Converting a Parquet directory into a skiplake (Delta) table in place, as Delta's CONVERT TO
DELTA does: no data file is read in full, moved or rewritten; only `_delta_log/` is written.

The stages, in order; every refusal happens before anything is written, so a refused directory
is left exactly as it was (no `_delta_log/` either):

1. the target: a directory, or a table of the session's catalog (its location, partition
   columns and bucket spec); a directory that already holds a Delta table is returned as it is
   (Delta's CONVERT TO DELTA is a no-op there too);
2. the data files, listed as Spark's file index lists them (skiplake.layout.hive_directory);
3. partitions: every file sits one `column=value` folder per partition column, in order; the
   types are given (a DDL string) or inferred as Spark infers them, and every folder's value
   must be a value of its column's type (skiplake.layout.partition_types);
4. footers, read in the driver or, past a threshold, by a Spark job (skiplake.spark.convert.footer_jobs):
   each file's schema as Spark reads it, which must be the same for all files (or merge, when
   asked), and its stats (skiplake.log.stats, the columns the table's properties choose);
5. buckets: every file's name carries a bucket id below the bucket count, and (by default) a
   Spark job checks that every row hashes to its file's bucket (skiplake.spark.buckets.bucket_check);
6. the commit, version 0: protocol, metaData, an add per file (dataChange true, the bucket id
   in its tags), and a commitInfo with operation CONVERT and Delta's parameters.
"""
from __future__ import annotations

import os
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from skiplake.errors import (
    ConversionBucketError,
    ConversionError,
    ConversionPartitionError,
    ConversionSchemaError,
    InvalidArgumentError,
    NotATableError,
)
from skiplake.layout.bucket_spec import BUCKET_TAG, BucketSpec
from skiplake.layout.hive_directory import DirectoryListing, list_data_files, partition_columns_of
from skiplake.layout.partition_types import canonical_value, infer_column_type, value_fits
from skiplake.layout.partitioning import has_partition_encoding, partition_value
from skiplake.log.actions import AddFile, Metadata, Protocol
from skiplake.log.checkpoint import write_checkpoint
from skiplake.log.features import required_protocol
from skiplake.log.location import is_remote, join, norm, resolve
from skiplake.log.parquet_schema import (
    SPARK_SCHEMA_KEY,
    SchemaConflict,
    UnsupportedColumnError,
    file_schema,
    merged,
    schema_key,
)
from skiplake.log.paths import to_log_path
from skiplake.log.schema import Field, Schema, type_name
from skiplake.log.snapshot import Snapshot, log_storage
from skiplake.log.stats import FooterColumns, footer_columns, read_footers, stats_from_metadata, stats_settings
from skiplake.spark.buckets.bucket_check import misplaced_rows
from skiplake.spark.convert.footer_jobs import job_threshold, read_footers_by_job
from skiplake.spark.convert.session_tables import session_table
from skiplake.spark.session.gateway import is_connect
from skiplake.spark.session.object_stores import use_location
from skiplake.spark.session.spark_types import as_schema
from skiplake.txn import create
from skiplake.txn.new_table import partition_columns, table_properties, with_column_mapping

if TYPE_CHECKING:
    import pyarrow.parquet as pq
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

OPERATION = "CONVERT"
# A converted table of this many files gets a checkpoint at version 0, so that loading it reads
# one Parquet file rather than parsing a commit of that many JSON lines.
CHECKPOINT_FILES = 1_000

PartitionBy = Sequence[str] | str | None


@dataclass(frozen=True)
class ConversionReport:
    """What a conversion found and committed."""
    path: str
    version: int
    converted: bool                    # False: the path already held a Delta table; nothing written
    files: int = 0
    bytes: int = 0
    rows: int | None = None
    partition_columns: list[str] = field(default_factory=list)   # "name type"
    partitions: int = 0
    bucket_spec: dict[str, Any] | None = None
    buckets_checked: str = ""          # "rows" (every row's bucket), "names" (file names only), ""
    footers_read_by: str = ""          # "driver" or "spark job"
    schema_merged: bool = False
    skipped_files: int = 0             # files Spark ignores (_SUCCESS, .crc, _temporary/...)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The report's fields as a dict."""
        return asdict(self)

    def text(self) -> str:
        """The report as text: the version committed, its files, partitions and buckets, and what was left out."""
        if not self.converted:
            return f"{self.path} already holds a Delta table (version {self.version}); nothing was written"
        parts = f"partitioned by {', '.join(self.partition_columns)} ({self.partitions:,} partitions)" \
            if self.partition_columns else "unpartitioned"
        rows = "unknown rows" if self.rows is None else f"{self.rows:,} rows"
        lines = [f"CONVERT {self.path}: version {self.version}, {self.files:,} files ({self.bytes:,} bytes, "
                 f"{rows}), {parts}; footers read by the {self.footers_read_by}; {self.seconds:.1f}s"]
        if self.bucket_spec:
            spec = self.bucket_spec
            sort = f", sorted by {', '.join(spec['sort_by'])}" if spec["sort_by"] else ""
            checked = {"rows": "every row's bucket checked", "names": "file names checked, rows not"}[
                self.buckets_checked]
            lines.append(f"  {spec['num_buckets']} buckets by {', '.join(spec['columns'])}{sort} ({checked})")
        if self.schema_merged:
            lines.append("  the files' schemas were merged (columns missing from a file read as NULL)")
        if self.skipped_files:
            lines.append(f"  {self.skipped_files:,} files Spark ignores were left out (_SUCCESS, .crc, _temporary/ ...)")
        return "\n".join(lines)


@dataclass(frozen=True)
class Conversion:
    """The table a conversion leaves (its snapshot at the version committed, or found) and its report."""
    snapshot: Snapshot
    report: ConversionReport


def convert(spark: "SparkSession", path: str | None, *, partition_by: "PartitionBy | StructType" = None,
            bucket_by: BucketSpec | None = None, catalog_table: str | None = None,
            properties: Mapping[str, str] | None = None, name: str | None = None,
            description: str | None = None, merge_schema: bool = False, verify_buckets: bool = True,
            footer_job_threshold: int | None = None, storage_options: Mapping[str, str] | None = None,
            progress: Callable[[str], None] | None = None) -> Conversion:
    """Convert the Parquet directory at `path` (or the location of the session catalog's
    `catalog_table`) into a table in place; see the module doc for the stages."""
    started = time.perf_counter()
    say = progress or (lambda _line: None)
    # 1. the target
    path, parts_given, bucket_by = _target(spark, path, catalog_table, partition_by, bucket_by)
    root = use_location(spark, path, storage_options)
    _check_directory(root)
    existing = _existing_table(root)
    if existing is not None:
        return Conversion(existing, ConversionReport(root, existing.version, converted=False,
                                                     seconds=round(time.perf_counter() - started, 3)))
    config = table_properties(root, properties, bucket_by)
    # 2. the data files
    listing = _listing(root)
    say(f"{len(listing.files):,} data files ({listing.total_bytes:,} bytes) under {root}")
    if bucket_by is not None:
        _check_bucket_ids(listing, bucket_by)   # from the names alone: refused before any footer is read
    # 3. partitions
    columns = partition_columns_of(listing, [n for n, _ in parts_given])
    part_types = _partition_types(spark, listing, columns, [t for _, t in parts_given])
    # 4. footers: schema and stats
    use_job = len(listing.files) >= job_threshold(spark, footer_job_threshold) and not is_connect(spark)
    say(f"reading {len(listing.files):,} footers in the {'Spark job' if use_job else 'driver'}")
    schema, stats, schema_merged = _schema_and_stats(spark, listing, columns, part_types, config, merge_schema, use_job)
    schema, config = with_column_mapping(root, schema, config, "none", new_table=False, bucketed=bucket_by is not None)
    # 5. buckets
    adds = _adds(listing, columns, part_types, stats, bucketed=bucket_by is not None)
    spec, checked = None, ""
    if bucket_by is not None:
        spec = bucket_by.resolved(root, schema, columns)
        checked = _check_buckets(spark, root, schema, columns, adds, spec, verify_buckets, say)
        config.update(spec.to_configuration())
    # 6. the commit
    metadata = Metadata.new(schema, columns, config, name=name, description=description)
    params: dict[str, Any] = {"numFiles": len(adds), "partitionedBy": columns, "collectStats": True,
                              "sourceFormat": "parquet", **({"catalogTable": catalog_table} if catalog_table else {})}
    snapshot = _commit(root, metadata, required_protocol(Protocol(1, 2), config), adds, params)
    say(f"committed version {snapshot.version}")
    report = ConversionReport(
        path=root, version=snapshot.version, converted=True, files=len(adds), bytes=listing.total_bytes,
        rows=_row_count(adds),
        partition_columns=[f"{c} {type_name(t)}" for c, t in zip(columns, part_types)],
        partitions=_partition_count(listing, columns), bucket_spec=_spec_summary(spec), buckets_checked=checked,
        footers_read_by="spark job" if use_job else "driver", schema_merged=schema_merged,
        skipped_files=len(listing.skipped), seconds=round(time.perf_counter() - started, 3))
    return Conversion(snapshot, report)


def _row_count(adds: Sequence[AddFile]) -> int | None:
    rows = [f.num_records for f in adds]
    return None if None in rows else sum(r or 0 for r in rows)


def _partition_count(listing: DirectoryListing, columns: Sequence[str]) -> int:
    return len({tuple(d.raw_value for d in f.folders) for f in listing.files}) if columns else 0


def _spec_summary(spec: BucketSpec | None) -> dict[str, Any] | None:
    if spec is None:
        return None
    return {"num_buckets": spec.num_buckets, "columns": list(spec.columns), "sort_by": list(spec.sort_by)}


# ---------------------------------------------------------------- 1. the target


def _target(spark: "SparkSession", path: str | None, catalog_table: str | None,
            partition_by: "PartitionBy | StructType", bucket_by: BucketSpec | None
            ) -> tuple[str, list[tuple[str, str | None]], BucketSpec | None]:
    """(directory, partition columns as given, bucket spec): from the arguments, and for a table of
    the session's catalog from its definition, which the arguments may repeat but not contradict."""
    parts_given = _partition_spec(spark, partition_by)
    if catalog_table is not None:
        table = session_table(spark, catalog_table)
        path = _catalog_path(path, table.location, catalog_table)
        parts_given = _catalog_partitions(catalog_table, parts_given, table.partition_columns)
        bucket_by = bucket_by if bucket_by is not None else table.bucket_spec
        if table.bucket_spec is not None and bucket_by != table.bucket_spec:
            raise InvalidArgumentError(f"bucket_by={bucket_by} differs from the catalog's spec of {catalog_table} "
                                       f"({table.bucket_spec}); leave it out to take the catalog's")
    if path is None:
        raise InvalidArgumentError("give the directory to convert, or catalog_table= for a table of the session's catalog")
    return path, parts_given, bucket_by


def _partition_spec(spark: "SparkSession", partition_by: "PartitionBy | StructType") -> list[tuple[str, str | None]]:
    """(name, type or None to infer) of each partition column as given: names, or a DDL string
    (`"d DATE, region STRING"`), or a StructType."""
    if partition_by is None:
        return []
    if isinstance(partition_by, str):
        items = [p.strip() for p in partition_by.split(",") if p.strip()]
        if any(len(p.split()) > 1 for p in items):
            return [(f.name, f.type) for f in _ddl(spark, partition_by).fields]
        return [(p.strip("`"), None) for p in items]
    if isinstance(partition_by, Sequence):
        names: Sequence[object] = partition_by  # as the user passed them (typed or not): checked, not trusted
        if not all(isinstance(p, str) and p.strip() for p in names):
            raise InvalidArgumentError(f"partition_by must be column names or a DDL string, not {partition_by!r}")
        return [(p, None) for p in partition_by]
    return [(f.name, f.type) for f in as_schema(partition_by, spark).fields]


def _ddl(spark: "SparkSession", text: str) -> Schema:
    try:
        return as_schema(text, spark)
    except Exception as e:  # Spark's ParseException
        raise InvalidArgumentError(f"partition_by={text!r} is neither column names nor a DDL string such as "
                                   f"'d DATE, region STRING': {str(e).splitlines()[0]}") from None


def _catalog_partitions(table: str, given: list[tuple[str, str | None]],
                        catalog: list[tuple[str, str]]) -> list[tuple[str, str | None]]:
    """The catalog table's partition columns; those given must be the same (types where given)."""
    if given and ([n.lower() for n, _ in given] != [n.lower() for n, _ in catalog]
                  or any(t is not None and t != ct for (_, t), (_, ct) in zip(given, catalog))):
        shown = ", ".join(f"{n} {type_name(t)}" for n, t in catalog) or "none"
        raise InvalidArgumentError(f"partition_by={[n for n, _ in given]} differs from the partition columns of "
                                   f"{table} in the catalog ({shown}); leave it out to take the catalog's")
    return list(catalog)


def _catalog_path(path: str | None, location: str, table: str) -> str:
    if path is not None and norm(resolve(path)) != norm(resolve(location)):
        raise InvalidArgumentError(f"{table} is at {location}, not at {path}; give one of path or catalog_table")
    return location


def _existing_table(root: str) -> Snapshot | None:
    try:
        return Snapshot.load(root)
    except NotATableError:
        return None


# ---------------------------------------------------------------- 2. and 3. files and partitions


def _check_directory(root: str) -> None:
    if is_remote(root):
        return  # an object store has no directories: an empty listing says the same
    if not os.path.exists(root):
        raise ConversionError(root, "there is no such directory")
    if not os.path.isdir(root):
        raise ConversionError(root, "it is a file, not a directory of Parquet files")


def _listing(root: str) -> DirectoryListing:
    listing = list_data_files(root)
    if not listing.files:
        what = f"only files Spark ignores ({len(listing.skipped)})" if listing.skipped else "no files at all"
        raise ConversionError(root, f"the directory has no data files: {what}", listing.skipped,
                              "Convert a directory of Parquet files (as Spark's df.write.parquet writes them).")
    return listing


def _partition_types(spark: "SparkSession", listing: DirectoryListing, columns: list[str],
                     given: list[str | None]) -> list[str]:
    """Each partition column's type: given (its folders' values checked) or inferred as Spark does."""
    ntz = (spark.conf.get("spark.sql.timestampType", "TIMESTAMP_LTZ") or "").upper() == "TIMESTAMP_NTZ"
    out = []
    for i, column in enumerate(columns):
        raws = sorted({f.folders[i].raw_value for f in listing.files})
        declared = given[i]
        type_ = declared if declared is not None else infer_column_type(raws, "timestamp_ntz" if ntz else "timestamp")
        if not has_partition_encoding(type_):
            raise ConversionPartitionError(listing.root, f"partition column {column!r} is given the type "
                                           f"{type_name(type_)}, whose values have no folder encoding", [],
                                           "Type it as a string, number, date, timestamp or boolean.")
        bad = [f"{column}={raw}" for raw in raws if not value_fits(partition_value(raw), type_)]
        if bad:
            raise ConversionPartitionError(
                listing.root, f"partition folders whose values are not values of {column} {type_name(type_)}", bad,
                "Give the column a type its folders' values have (a DDL string such as "
                f"\"{column} STRING\"), or move those folders out.")
        out.append(type_)
    return out


# ---------------------------------------------------------------- 4. footers: schema and stats


def _footers(spark: "SparkSession", listing: DirectoryListing, use_job: bool
             ) -> Iterator[tuple[int, "pq.FileMetaData | Exception"]]:
    paths = [join(listing.root, f.rel) for f in listing.files]
    if use_job:
        return read_footers_by_job(spark, paths)
    return enumerate(read_footers(paths, [f.size for f in listing.files]))


def _table_schema(data: Schema, columns: list[str], types: list[str]) -> Schema:
    """The data columns, then the partition columns, as Spark merges the two: a partition column
    the files also hold keeps its place among them, with the partition's type."""
    typed = {c.lower(): Field(c, t, True) for c, t in zip(columns, types)}
    fields = [typed.pop(f.name.lower(), f) for f in data.fields]
    return Schema(tuple(fields + [f for c in columns if (f := typed.get(c.lower())) is not None]))


class _FileStats:
    """Each file's stats JSON against one table schema, with the settings the table's properties
    give; files of one Parquet schema share the work of finding the stats columns in a footer."""

    def __init__(self, table: Schema, columns: list[str], config: dict[str, str]) -> None:
        self.table, self.columns = table, columns
        self.limit, self.stats_columns = stats_settings(config)
        self._placed: dict[tuple, FooterColumns] = {}

    def of(self, meta: "pq.FileMetaData", key: tuple) -> str:
        layout = self._placed.get((key, meta.num_columns))
        if layout is None:
            layout = self._placed[(key, meta.num_columns)] = footer_columns(
                meta, self.table, self.columns, self.limit, self.stats_columns)
        return stats_from_metadata(meta, self.table, self.columns, columns=layout)


@dataclass
class _Footers:
    """What one pass over the footers found: each distinct schema and its files (in listing
    order), and the stats of the files of the first file's schema, computed with it."""
    table: Schema
    stats: list[str | None]
    groups: dict[tuple, list[int]]
    schemas: dict[tuple, Schema]


def _first_pass(spark: "SparkSession", listing: DirectoryListing, columns: list[str], types: list[str],
                config: dict[str, str], use_job: bool) -> _Footers:
    files = listing.files
    stats: list[str | None] = [None] * len(files)
    groups: dict[tuple, list[int]] = defaultdict(list)
    schemas: dict[tuple, Schema] = {}
    unreadable: list[str] = []
    unsupported: list[str] = []
    table: Schema | None = None
    file_stats: _FileStats | None = None
    first: tuple = ()
    parsed: dict[bytes, Schema] = {}   # files of one schema share its parsing
    for i, meta in _footers(spark, listing, use_job):
        if isinstance(meta, Exception):
            unreadable.append(f"{files[i].rel} ({_one_line(meta)})")
            continue
        try:
            schema = _cached_schema(meta, parsed)
        except UnsupportedColumnError as e:
            unsupported.append(f"{files[i].rel} ({e})")
            continue
        key = schema_key(schema)
        if file_stats is None:
            table, first = _table_schema(schema, columns, types), key
            file_stats = _FileStats(table, columns, config)
        groups[key].append(i)
        schemas.setdefault(key, schema)
        if key == first:
            stats[i] = file_stats.of(meta, key)
    if unreadable:
        raise ConversionError(listing.root, "files that are not readable Parquet files (Spark would fail reading "
                              "them too)", sorted(unreadable),
                              "Move them out of the directory, or rename them to start with _ or . so that Spark "
                              "and the conversion skip them.")
    if unsupported:
        raise ConversionSchemaError(listing.root, "columns of types a table cannot hold", sorted(unsupported),
                                    "Rewrite those columns as supported types with Spark first.")
    assert table is not None
    for key in groups:
        groups[key].sort()
    return _Footers(table, stats, dict(groups), schemas)


def _cached_schema(meta: "pq.FileMetaData", parsed: dict[bytes, Schema]) -> Schema:
    """file_schema, parsed once per distinct Spark schema stored in the footers."""
    stored = (meta.metadata or {}).get(SPARK_SCHEMA_KEY)
    if stored is None:
        return file_schema(meta)
    if stored not in parsed:
        parsed[stored] = file_schema(meta)
    return parsed[stored]


def _schema_and_stats(spark: "SparkSession", listing: DirectoryListing, columns: list[str], types: list[str],
                      config: dict[str, str], merge_schema: bool, use_job: bool
                      ) -> tuple[Schema, list[str | None], bool]:
    """The table's schema, each file's stats JSON, and whether the files' schemas were merged.

    One pass computes stats with the first schema read, which is the table's when all files
    agree; when they do not (allowed with merge_schema) the footers are read again, each file's
    stats then computed against the merged schema. (Keeping every footer of the first pass in
    memory instead would cost the driver about as much as the files' count times a footer.)"""
    found = _first_pass(spark, listing, columns, types, config, use_job)
    if len(found.groups) == 1:
        return found.table, found.stats, False
    table = _table_schema(_union(listing, found, merge_schema), columns, types)
    file_stats = _FileStats(table, columns, config)
    parsed: dict[bytes, Schema] = {}
    stats: list[str | None] = [None] * len(listing.files)
    for i, meta in _footers(spark, listing, use_job):
        if isinstance(meta, Exception):
            raise ConversionError(listing.root, f"a file changed while it was converted ({_one_line(meta)})",
                                  [listing.files[i].rel])
        stats[i] = file_stats.of(meta, schema_key(_cached_schema(meta, parsed)))
    return table, stats, True


def _union(listing: DirectoryListing, found: _Footers, merge_schema: bool) -> Schema:
    """The merged schema of files whose schemas differ, or why they are refused."""
    files = listing.files
    order = sorted(found.groups, key=lambda k: found.groups[k][0])
    if not merge_schema:
        raise ConversionSchemaError(
            listing.root, f"the data files have {len(order)} different schemas "
            f"({_differences(found.schemas, order)}); {len(found.groups[order[0]])} files have the schema of "
            f"{files[found.groups[order[0]][0]].rel}, these do not",
            [files[i].rel for k in order[1:] for i in found.groups[k]],
            "Pass merge_schema=True to take the union of their columns (what Spark's mergeSchema option "
            "reads: a column a file lacks reads as NULL), or rewrite the odd files.")
    union = found.schemas[order[0]]
    for k in order[1:]:
        try:
            union = merged(union, found.schemas[k])
        except SchemaConflict as e:
            raise ConversionSchemaError(
                listing.root, f"the data files' schemas cannot be merged: {e}",
                [files[found.groups[order[0]][0]].rel, files[found.groups[k][0]].rel],
                "Files must agree on each column's type; rewrite the odd files with Spark, casting the "
                "column.") from None
    return union


def _differences(schemas: dict[tuple, Schema], order: list[tuple]) -> str:
    """How the other schemas differ from the first, in a few words."""
    base = schemas[order[0]]
    out = []
    for k in order[1:]:
        other = schemas[k]
        missing = [n for n in base.names if n not in other.names]
        extra = [n for n in other.names if n not in base.names]
        changed = [f"{f.name} {type_name(base.field(f.name).type)} vs {type_name(f.type)}" for f in other.fields
                   if f.name in base.names and schema_key(Schema((base.field(f.name),))) != schema_key(Schema((f,)))]
        said = ([f"without {', '.join(missing)}"] if missing else []) + ([f"with {', '.join(extra)}"] if extra else []) \
            + changed
        out.append("; ".join(said) or "the columns in another order")
    return " | ".join(out)


def _one_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _adds(listing: DirectoryListing, columns: list[str], types: list[str], stats: list[str | None],
          bucketed: bool) -> list[AddFile]:
    """An add per file: its partition values as the log spells them, its stats, and in a bucketed
    table its bucket id (from its name) in its tags."""
    adds = []
    for f, st in zip(listing.files, stats):
        values = {c: canonical_value(d.value, t) for c, t, d in zip(columns, types, f.folders)}
        adds.append(AddFile(path=to_log_path(f.rel), partitionValues=values, size=f.size,
                            modificationTime=f.mtime_ms, dataChange=True, stats=st,
                            tags={BUCKET_TAG: str(f.bucket_id)} if bucketed else None))
    return adds


# ---------------------------------------------------------------- 5. buckets


def _check_bucket_ids(listing: DirectoryListing, spec: BucketSpec) -> None:
    """Every file's name must carry a bucket id below the bucket count."""
    wrong = [f"{f.rel} ({'no bucket id in its name' if f.bucket_id is None else f'bucket {f.bucket_id}'})"
             for f in listing.files if f.bucket_id is None or f.bucket_id >= spec.num_buckets]
    if wrong:
        raise ConversionBucketError(
            listing.root, f"files whose names carry no bucket id of {spec.num_buckets} buckets (Spark's bucketed "
                          "files end in _<bucket>.c000...parquet)", wrong,
            "Check the bucket count, or move the files that bucketBy did not write out of the directory.")


def _check_buckets(spark: "SparkSession", root: str, schema: Schema, columns: list[str], adds: list[AddFile],
                   spec: BucketSpec, verify: bool, say: Callable[[str], None]) -> str:
    """How the files' buckets were checked: by their names (done before any footer was read), and
    unless `verify` is off by every row's bucket."""
    if not verify:
        return "names"
    say(f"checking every row's bucket of {len(adds):,} files (a Spark job over the bucket columns)")
    _check_rows(spark, root, schema, columns, adds, spec)
    return "rows"


def _check_rows(spark: "SparkSession", root: str, schema: Schema, columns: list[str], adds: list[AddFile],
                spec: BucketSpec) -> None:
    found = misplaced_rows(spark, root, schema, columns, adds, spec)
    if found:
        raise ConversionBucketError(
            root, f"files holding rows of other buckets than their name's ({sum(found.values()):,} rows in "
                  f"{len(found)} files; a row's bucket is pmod(hash({', '.join(spec.columns)}), {spec.num_buckets}))",
            [f"{p} ({n:,} rows)" for p, n in sorted(found.items())],
            "Check the bucket columns and count (they must be the ones the files were written with), or pass "
            "verify_buckets=False to take the names on trust.")


# ---------------------------------------------------------------- 6. the commit


def _commit(root: str, metadata: Metadata, protocol: Protocol, adds: list[AddFile],
            params: dict[str, Any]) -> Snapshot:
    """Version 0, and a checkpoint of it for a large table. A failed write leaves no empty
    `_delta_log/` behind."""
    partition_columns(root, metadata.schema, list(metadata.partitionColumns))
    try:
        snapshot = create(root, metadata, protocol, list(adds), operation=OPERATION,
                          operation_parameters=params, operation_metrics={"numConvertedFiles": str(len(adds))})
    except Exception:
        _remove_empty_log(root)
        raise
    if len(adds) >= CHECKPOINT_FILES:
        write_checkpoint(log_storage(root), snapshot)
    return snapshot


def _remove_empty_log(root: str) -> None:
    storage = log_storage(root)
    if is_remote(root) or storage.list():
        return
    try:
        os.rmdir(join(root, "_delta_log"))
    except OSError:
        pass

