"""Writing Arrow batches as a table's data files without Spark, for the `skiplake` data source
and its streaming sink: rows conformed to the table's schema, NOT NULL kept, one Parquet file per
partition (and bucket) and task, physical column names and field ids under column mapping, stats
from each file's footer. The commit (skiplake.txn.file_commits) adds the files; until then no
reader sees them.

The table's rules (generated and identity columns, CHECK constraints, invariants) are applied by
skiplake.txn.arrow_rules; a bucketed table's rows go to the buckets Spark's bucketBy would
choose, one file per partition, bucket and task, named and tagged with the bucket id."""
from __future__ import annotations

import io
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from skiplake.errors import ConstraintViolationError, SchemaMismatchError
from skiplake.layout.bucket_spec import BUCKET_COLUMN, BUCKET_TAG, BucketSpec, bucket_file_name, bucket_spec_of
from skiplake.layout.bucketing import bucket_ids
from skiplake.layout.partitioning import partition_dir
from skiplake.log.actions import AddFile, Metadata, now_ms
from skiplake.log.arrow_reads import renamed
from skiplake.log.column_mapping import physical_name, physical_names, physical_schema
from skiplake.log.paths import absolute_path, to_log_path
from skiplake.log.schema import Schema
from skiplake.log.stats import DEFAULT_NUM_INDEXED_COLS, stats_from_metadata, stats_settings
from skiplake.log.storage_for import storage_at
from skiplake.log.values import format_partition_value
from skiplake.txn.arrow_rules import ArrowRules, furthest

# Rows per data file before the writer starts another (Spark's maxRecordsPerFile is unlimited by
# default; a bounded file keeps a Python worker's memory bounded).
MAX_ROWS_PER_FILE = 4_000_000
_FIELD_ID = b"PARQUET:field_id"


@dataclass(frozen=True)
class FileWritePlan:
    """What a task needs to write a table's files: picklable, made once on the driver."""
    table_path: str
    schema: Schema                # the table's logical schema
    partition_columns: tuple[str, ...]
    mode: str                     # column mapping mode
    num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS
    stats_columns: tuple[str, ...] | None = None
    rules: ArrowRules | None = None          # None: rows are written as they come (a rewrite)
    bucket: BucketSpec | None = None

    @staticmethod
    def of(table_path: str, metadata: Metadata, mode: str, given: Sequence[str] | None = None,
           with_rules: bool = True) -> "FileWritePlan":
        """The plan for writing rows with the columns `given` (None: not known) as files of the
        table whose metadata is `metadata`; `with_rules` False for rewrites of rows already in
        the table. Rules it cannot apply are refused (skiplake.txn.arrow_rules)."""
        limit, named = stats_settings(metadata.configuration)
        rules = ArrowRules.of(table_path, metadata, logical_arrow_schema(metadata.schema), given) if with_rules else None
        return FileWritePlan(table_path, metadata.schema, tuple(metadata.partitionColumns), mode, limit,
                             tuple(named) if named is not None else None,
                             None if rules is None or rules.empty else rules, bucket_spec_of(metadata.configuration))


@dataclass
class TaskFiles:
    """What one write task made: its files, and the furthest value of each identity column in them."""
    adds: list[AddFile] = field(default_factory=list)
    marks: dict[str, int] = field(default_factory=dict)


def write_batches(plan: FileWritePlan, batches: Iterable[pa.RecordBatch], data_change: bool = True) -> list[AddFile]:
    """Write `batches` (columns named as the table's, in any order) as new data files of the table;
    their add actions. See write_task."""
    return write_task(plan, batches, data_change=data_change).adds


def write_task(plan: FileWritePlan, batches: Iterable[pa.RecordBatch], task: int = 0, time_zone: str = "UTC",
               data_change: bool = True) -> TaskFiles:
    """Write one task's `batches` as new data files of the table, the table's rules applied
    (`task`: its partition id, which identity values depend on; `time_zone`: Spark's session
    time zone). A row that breaks a rule, NOT NULL included, is a ConstraintViolationError."""
    out = TaskFiles()
    buffered: dict[tuple, list[pa.Table]] = {}
    rows: dict[tuple, int] = {}
    seen = 0
    for batch in batches:
        table = conformed(plan, pa.Table.from_batches([batch]))
        if plan.rules is not None:
            given = {n.lower() for n in batch.schema.names}
            table = plan.rules.applied(table, given, task, seen, time_zone)
            _mark(plan.rules, table, out.marks)
        seen += table.num_rows
        for key, part in _by_partition(plan, table):
            buffered.setdefault(key, []).append(part)
            rows[key] = rows.get(key, 0) + part.num_rows
            if rows[key] >= MAX_ROWS_PER_FILE:
                out.adds.append(_write_file(plan, key, pa.concat_tables(buffered.pop(key)), data_change))
                rows[key] = 0
    for key, parts in buffered.items():
        out.adds.append(_write_file(plan, key, pa.concat_tables(parts), data_change))
    return out


def _mark(rules: ArrowRules, table: pa.Table, marks: dict[str, int]) -> None:
    """Move `marks` past the identity values of `table`."""
    for identity in rules.identities:
        value = furthest(identity, table.column(identity.name))
        if value is None:
            continue
        known = marks.get(identity.name)
        if known is None or (value > known if identity.step > 0 else value < known):
            marks[identity.name] = value


def logical_arrow_schema(schema: Schema) -> pa.Schema:
    """The Arrow schema rows of the table's logical columns are conformed to."""
    return pa.schema([pa.field(f.name, arrow_type(f.type), f.nullable) for f in schema.fields])


def conformed(plan: FileWritePlan, table: pa.Table) -> pa.Table:
    """`table` as the table's logical columns in order: names matched case-insensitively, columns
    it lacks as nulls, types cast safely; a column the table has not is a SchemaMismatchError."""
    by_name = {name.lower(): i for i, name in enumerate(table.column_names)}
    known = {f.name.lower() for f in plan.schema.fields}
    extra = [n for n in table.column_names if n.lower() not in known]
    if extra:
        raise SchemaMismatchError(
            plan.table_path, [f"column {n!r} is not in the table" for n in extra],
            "Nothing was written. Add the columns first (t.add_columns, or ALTER TABLE ... ADD COLUMNS), or "
            "write with t.append(df, merge_schema=True).")
    columns, fields = [], []
    for f in plan.schema.fields:
        target = arrow_type(f.type)
        index = by_name.get(f.name.lower())
        column = table.column(index) if index is not None else pa.nulls(table.num_rows, target)
        if not f.nullable and column.null_count:
            raise ConstraintViolationError(plan.table_path, f"NOT NULL constraint on {f.name}", "",
                                           f"{f.name} is NULL", fix="Fix the rows, or make the column nullable.")
        columns.append(_cast(plan, f.name, column, target))
        fields.append(pa.field(f.name, target, f.nullable))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def _cast(plan: FileWritePlan, name: str, column: Any, target: pa.DataType) -> Any:
    if column.type == target:
        return column
    try:
        return column.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SchemaMismatchError(plan.table_path, [f"column {name!r} is {column.type} in the DataFrame and cannot "
                                                     f"be written as the table's {target} ({e})"]) from None


def _by_partition(plan: FileWritePlan, table: pa.Table) -> Iterator[tuple[tuple, pa.Table]]:
    """The rows by partition values and then bucket id (the key's last item, with a bucket spec)."""
    keys = list(plan.partition_columns)
    if plan.bucket is not None and table.num_rows:
        # The bucket id is the key's last item.
        types = [plan.schema.field(c).type for c in plan.bucket.columns]
        ids = bucket_ids([table.column(c) for c in plan.bucket.columns], types, plan.bucket.num_buckets)
        table = table.append_column(BUCKET_COLUMN, pa.array(ids, pa.int32()))
        keys.append(BUCKET_COLUMN)
    if not table.num_rows:
        return   # no rows, no file
    if not keys:
        yield (), table
        return
    indexed = table.select(keys).append_column("__row", pa.array(np.arange(table.num_rows), pa.int64()))
    groups = indexed.group_by(keys, use_threads=False).aggregate([("__row", "list")])
    data = table.drop_columns([BUCKET_COLUMN]) if plan.bucket is not None else table
    for i in range(groups.num_rows):
        key = tuple(groups.column(c)[i].as_py() for c in keys)
        yield key, _sorted(plan, data.take(groups.column("__row_list")[i].values))


def _sorted(plan: FileWritePlan, rows: pa.Table) -> pa.Table:
    """A bucket's rows by the bucket's sort columns, ascending with NULLs first as Spark sorts them."""
    if plan.bucket is None or not plan.bucket.sort_by or not rows.num_rows:
        return rows
    return rows.take(pc.sort_indices(rows, sort_keys=[(c, "ascending", "at_start") for c in plan.bucket.sort_by]))


def _write_file(plan: FileWritePlan, key: tuple, table: pa.Table, data_change: bool) -> AddFile:
    fields = {f.name: f for f in plan.schema.fields}
    values = {physical_name(fields[c], plan.mode): format_partition_value(v, fields[c].type)
              for c, v in zip(plan.partition_columns, key)}
    data = table.drop_columns(list(plan.partition_columns)) if plan.partition_columns else table
    bucket = key[-1] if plan.bucket is not None and key else None
    physical = _physical(plan, data)
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, physical.schema, compression="snappy") as writer:
        writer.write_table(physical, row_group_size=1_048_576)
    body = sink.getvalue()
    folder = partition_dir(list(values), values) if values else ""
    rel = f"{folder}/" if folder else ""
    name = f"part-00000-{uuid.uuid4()}.c000.snappy.parquet"
    rel += name if bucket is None else bucket_file_name(name, bucket)
    storage_at(plan.table_path).put(rel, body)
    meta = pq.read_metadata(io.BytesIO(body))
    phys_schema = physical_schema(plan.schema, plan.mode)
    phys_parts = [physical_name(fields[c], plan.mode) for c in plan.partition_columns]
    stats = stats_from_metadata(meta, phys_schema, phys_parts, plan.num_indexed_cols,
                                list(plan.stats_columns) if plan.stats_columns is not None else None)
    return AddFile(path=to_log_path(rel), partitionValues=values, size=len(body), modificationTime=now_ms(),
                   dataChange=data_change, stats=stats, tags=None if bucket is None else {BUCKET_TAG: str(bucket)})


def _physical(plan: FileWritePlan, table: pa.Table) -> pa.Table:
    """Columns as the data files name them, with Parquet field ids under column mapping."""
    if plan.mode == "none":
        return table
    names = physical_names(plan.schema, plan.mode)
    fields = {f.name: f for f in plan.schema.fields}
    columns, out_fields = [], []
    phys = {f.name: f for f in physical_schema(plan.schema, plan.mode).fields}
    for name in table.column_names:
        f = fields[name]
        column = table.column(name).combine_chunks()
        column = renamed(column, f.type, plan.mode, to_physical=True)
        columns.append(column)
        field_id = str(phys[names[name]].metadata["parquet.field.id"]).encode()
        out_fields.append(pa.field(names[name], column.type, f.nullable, {_FIELD_ID: field_id}))
    return pa.Table.from_arrays(columns, schema=pa.schema(out_fields))


def arrow_type(type_: Any) -> pa.DataType:
    """The Arrow type Spark gives a Delta type (timestamps in microseconds, UTC for `timestamp`)."""
    if isinstance(type_, str):
        simple = _SIMPLE.get(type_)
        if simple is not None:
            return simple
        if type_.startswith("decimal("):
            precision, scale = (int(x) for x in type_[len("decimal("):-1].split(","))
            return pa.decimal128(precision, scale)
        if type_.startswith(("varchar", "char")):
            return pa.string()
        raise ValueError(f"no Arrow type for the Delta type {type_}")
    kind = type_.get("type")
    if kind == "struct":
        return pa.struct([pa.field(c["name"], arrow_type(c["type"]), bool(c.get("nullable", True)))
                          for c in type_["fields"]])
    if kind == "array":
        return pa.list_(pa.field("element", arrow_type(type_["elementType"]), bool(type_.get("containsNull", True))))
    if kind == "map":
        return pa.map_(arrow_type(type_["keyType"]), arrow_type(type_["valueType"]))
    raise ValueError(f"no Arrow type for the Delta type {kind}")


_SIMPLE = {"byte": pa.int8(), "short": pa.int16(), "integer": pa.int32(), "long": pa.int64(),
           "float": pa.float32(), "double": pa.float64(), "string": pa.string(), "binary": pa.binary(),
           "boolean": pa.bool_(), "date": pa.date32(), "timestamp": pa.timestamp("us", "UTC"),
           "timestamp_ntz": pa.timestamp("us"), "void": pa.null()}


def discard(table_path: str, adds: Sequence[AddFile]) -> None:
    """Delete files a write made that no commit will add."""
    storage = storage_at(table_path)
    names = []
    for f in adds:
        full = absolute_path(table_path, f.path)
        names.append(full[len(table_path):].lstrip("/") if full.startswith(table_path) else full)
    if names:
        storage.delete_many(names)
