"""Writing Arrow batches as a table's data files without Spark, for the `skiplake` data source
and its streaming sink: rows conformed to the table's schema, NOT NULL kept, one Parquet file per
partition and task, physical column names and field ids under column mapping, stats from each
file's footer. The commit (skiplake.txn.commit) adds the files; until then no reader sees them.

What this path cannot apply without Spark's SQL (CHECK constraints, generated and identity
columns, bucketing) is refused before a row is written (`refusal`)."""
from __future__ import annotations

import io
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from skiplake.errors import ConstraintViolationError, SchemaMismatchError
from skiplake.layout.bucket_spec import bucket_spec_of
from skiplake.layout.partitioning import partition_dir
from skiplake.log.actions import AddFile, Metadata, now_ms
from skiplake.log.arrow_reads import renamed
from skiplake.log.column_mapping import physical_name, physical_names, physical_schema
from skiplake.log.paths import absolute_path, to_log_path
from skiplake.log.schema import Schema
from skiplake.log.stats import DEFAULT_NUM_INDEXED_COLS, stats_from_metadata, stats_settings
from skiplake.log.storage_for import storage_at
from skiplake.log.values import format_partition_value
from skiplake.txn.constraints import check_constraints, generated_columns, table_rules
from skiplake.txn.identity import identity_columns

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

    @staticmethod
    def of(table_path: str, metadata: Metadata, mode: str) -> "FileWritePlan":
        """The plan for writing files of the table whose metadata is `metadata`."""
        limit, named = stats_settings(metadata.configuration)
        return FileWritePlan(table_path, metadata.schema, tuple(metadata.partitionColumns), mode, limit,
                             tuple(named) if named is not None else None)


def refusal(metadata: Metadata) -> str | None:
    """The writer feature of the table that files written without Spark cannot apply, if any."""
    schema = metadata.schema
    if check_constraints(metadata.configuration) or any(r.label.startswith("invariant") for r in table_rules(metadata)):
        return "CHECK constraints"
    if generated_columns(schema):
        return "generated columns"
    if identity_columns(schema):
        return "identity columns"
    if bucket_spec_of(metadata.configuration) is not None:
        return "buckets"
    return None


def write_batches(plan: FileWritePlan, batches: Iterable[pa.RecordBatch], data_change: bool = True) -> list[AddFile]:
    """Write `batches` (columns named as the table's, in any order) as new data files of the table;
    their add actions. A row with NULL in a NOT NULL column is a ConstraintViolationError."""
    out: list[AddFile] = []
    buffered: dict[tuple, list[pa.Table]] = {}
    rows: dict[tuple, int] = {}
    for batch in batches:
        table = conformed(plan, pa.Table.from_batches([batch]))
        for key, part in _by_partition(table, plan.partition_columns):
            buffered.setdefault(key, []).append(part)
            rows[key] = rows.get(key, 0) + part.num_rows
            if rows[key] >= MAX_ROWS_PER_FILE:
                out.append(_write_file(plan, key, pa.concat_tables(buffered.pop(key)), data_change))
                rows[key] = 0
    for key, parts in buffered.items():
        out.append(_write_file(plan, key, pa.concat_tables(parts), data_change))
    return out


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


def _by_partition(table: pa.Table, partition_columns: tuple[str, ...]) -> Iterator[tuple[tuple, pa.Table]]:
    if not partition_columns or not table.num_rows:
        yield (), table
        return
    keys = table.select(list(partition_columns)).append_column("__row", pa.array(range(table.num_rows), pa.int64()))
    groups = keys.group_by(list(partition_columns), use_threads=False).aggregate([("__row", "list")])
    for i in range(groups.num_rows):
        key = tuple(groups.column(c)[i].as_py() for c in partition_columns)
        yield key, table.take(groups.column("__row_list")[i].values)


def _write_file(plan: FileWritePlan, key: tuple, table: pa.Table, data_change: bool) -> AddFile:
    fields = {f.name: f for f in plan.schema.fields}
    values = {physical_name(fields[c], plan.mode): format_partition_value(v, fields[c].type)
              for c, v in zip(plan.partition_columns, key)}
    data = table.drop_columns(list(plan.partition_columns)) if plan.partition_columns else table
    physical = _physical(plan, data)
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, physical.schema, compression="snappy") as writer:
        writer.write_table(physical, row_group_size=1_048_576)
    body = sink.getvalue()
    folder = partition_dir(list(values), values) if values else ""
    rel = f"{folder}/" if folder else ""
    rel += f"part-00000-{uuid.uuid4()}.c000.snappy.parquet"
    storage_at(plan.table_path).put(rel, body)
    meta = pq.read_metadata(io.BytesIO(body))
    phys_schema = physical_schema(plan.schema, plan.mode)
    phys_parts = [physical_name(fields[c], plan.mode) for c in plan.partition_columns]
    stats = stats_from_metadata(meta, phys_schema, phys_parts, plan.num_indexed_cols,
                                list(plan.stats_columns) if plan.stats_columns is not None else None)
    return AddFile(path=to_log_path(rel), partitionValues=values, size=len(body), modificationTime=now_ms(),
                   dataChange=data_change, stats=stats)


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
