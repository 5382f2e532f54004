"""A small build side's join keys, read in the driver: no Spark job for a filtered dimension.

Most build sides of a star join are one dimension table under a literal filter (`item WHERE
i_item_id = '...'`, `date_dim WHERE d_year = 2000`). Their keys through Spark cost a job, about
0.2 s on two cores even for 73,000 rows, which is most of what a selective query then takes.
Read here with pyarrow, the same keys take a few milliseconds: the statically selected files'
needed columns are read, the filter is applied by skiplake.skipping.rows (which raises NotExact
for anything it cannot evaluate exactly as Spark does, and the caller then asks Spark), and
each key column's distinct non-null values are taken from the rows where no key is NULL, as
skiplake.spark.pruning.build_keys does.
"""
from __future__ import annotations

import time
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from skiplake.expr.tree import Node
from skiplake.expr.visitor import columns_of
from skiplake.log.actions import AddFile
from skiplake.log.paths import absolute_path
from skiplake.log.schema import Schema
from skiplake.log.storage_for import parquet_source
from skiplake.log.values import parse_partition_value
from skiplake.skipping.key_filters import KEY_CAP, BuildKeys
from skiplake.skipping.rows import NotExact, exact_type, keep_rows
from skiplake.skipping.stats_table import arrow_type


def local_keys(table_path: str, files: pa.Table, schema: Schema, predicate: Node | None,
               keys: Sequence[str], cap: int = KEY_CAP) -> BuildKeys:
    """The distinct non-null values of each of `keys` (columns of `schema`) over the rows of
    `files` (log rows with a `path`) on which `predicate` is TRUE. Raises NotExact when the
    predicate or a column cannot be evaluated exactly as Spark would, OSError or ArrowException
    when a file cannot be read."""
    started = time.perf_counter()
    names = list(dict.fromkeys([*keys, *sorted(columns_of(predicate) if predicate is not None else ())]))
    target = _exact_schema(schema, names)
    paths = [absolute_path(table_path, p) for p in files.column("path").to_pylist()]
    table = pa.concat_tables([_read(p, target) for p in paths]) if paths else target.empty_table()
    rows = keep_rows(predicate, table).select(list(keys)).drop_null()
    distinct = [pc.unique(rows.column(k)) for k in keys]
    if any(len(d) > cap for d in distinct):
        bounds = [[pc.min(d).as_py(), pc.max(d).as_py()] for d in distinct]
        return BuildKeys(bounds, bounded=True, seconds=time.perf_counter() - started, local=True)
    values = [d.to_pylist() for d in distinct]
    return BuildKeys(values, seconds=time.perf_counter() - started, local=True)


def any_row(table_path: str, files: Sequence[AddFile], schema: Schema, partition_columns: Sequence[str],
            predicate: Node) -> bool:
    """Whether any row of the files (deletion vectors not applied) satisfies `predicate` as
    Spark's WHERE would; partition columns take each file's logged value. Raises NotExact,
    OSError or ArrowException as local_keys."""
    names = sorted(columns_of(predicate))
    if not names:
        # (`true`, `NOT false`: with no column read, a file would look like it has no rows.)
        raise NotExact("a predicate that names no column")
    target = _exact_schema(schema, names)
    parts = {c.lower(): c for c in partition_columns}
    for f in files:
        table = _read(absolute_path(table_path, f.path), target)
        for i, fld in enumerate(target):
            if fld.name.lower() in parts:
                raw = (f.partitionValues or {}).get(parts[fld.name.lower()])
                value = parse_partition_value(raw, schema.field(fld.name).type)
                table = table.set_column(i, fld, pa.array([value] * table.num_rows, fld.type))
        if keep_rows(predicate, table).num_rows:
            return True
    return False


def _exact_schema(schema: Schema, names: Sequence[str]) -> pa.Schema:
    """The Arrow schema of `names`, columns of `schema` that compare exactly as in Spark."""
    fields = []
    for name in names:
        field = schema.find(name)
        if field is None or field.name != name or not exact_type(field.type):
            raise NotExact(f"column {name}")
        fields.append(pa.field(name, arrow_type(field.type)))
    return pa.schema(fields)


def _read(path: str, target: pa.Schema) -> pa.Table:
    """The file's columns of `target`, as its types; a column the file lacks (added to the table
    after the file was written) is NULL in every row, as Spark reads it."""
    f = pq.ParquetFile(parquet_source(path))
    present = set(f.schema_arrow.names)
    read = f.read(columns=[n for n in target.names if n in present], use_threads=False)
    columns = []
    for fld in target:
        if fld.name in present:
            col = read.column(fld.name)
            columns.append(col if col.type == fld.type else col.cast(fld.type, safe=True))
        else:
            columns.append(pa.nulls(read.num_rows, fld.type))
    return pa.Table.from_arrays(columns, schema=target)
