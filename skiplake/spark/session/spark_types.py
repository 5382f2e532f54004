"""Converting between skiplake's schema model and Spark's StructType, and checking writes against it."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from skiplake.errors import InvalidArgumentError
from skiplake.log.schema import COLLATIONS_KEY, Field, Schema, type_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Lossless widenings accepted on write (the DataFrame column is cast to the table's type).
_WIDENING = {
    ("byte", "short"), ("byte", "integer"), ("byte", "long"), ("short", "integer"), ("short", "long"),
    ("integer", "long"), ("float", "double"),
}


def to_spark(schema: Schema) -> StructType:
    """`schema` as Spark's StructType. Collated strings keep their collation: Delta writes each as
    `provider.NAME[.version]` in the field's `__COLLATIONS` metadata (ICU's with the version it
    was built with, `icu.UNICODE_CI.75.1`), and PySpark reads only `provider.NAME`."""
    return StructType.fromJson(_without_collation_versions(schema.to_json()))


def _without_collation_versions(node: Any) -> Any:
    """A schema's JSON with every collation name cut to `provider.NAME` (a copy)."""
    if isinstance(node, list):
        return [_without_collation_versions(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _without_collation_versions(v) for k, v in node.items()}
    meta = out.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get(COLLATIONS_KEY), dict):
        meta[COLLATIONS_KEY] = {path: ".".join(str(name).split(".")[:2])
                                for path, name in meta[COLLATIONS_KEY].items()}
    return out


def from_spark(struct: StructType) -> Schema:
    """Spark's StructType as a skiplake Schema."""
    return Schema.from_json(json.loads(struct.json()))


def spark_type(type_: Any) -> DataType:
    """Spark's DataType of a Delta type (a primitive's name, or a nested type's JSON dict)."""
    return StructType.fromJson({"type": "struct", "fields": [
        {"name": "x", "type": type_, "nullable": True, "metadata": {}}]}).fields[0].dataType


def ddl(schema: Schema) -> str:
    """The columns of `schema` as the column list of a Spark `CREATE TABLE`."""
    return ", ".join(f"{_quoted(f.name)} {type_name(f.type, _spark_name, _quoted)}" for f in schema.fields)


def _spark_name(type_: str) -> str:
    return spark_type(type_).simpleString()


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _strip(type_: Any) -> Any:
    """A type with nullability and metadata removed, for comparing shapes."""
    if isinstance(type_, dict):
        kind = type_.get("type")
        if kind == "struct":
            return {"type": "struct", "fields": [(f["name"].lower(), _strip(f["type"])) for f in type_["fields"]]}
        if kind == "array":
            return {"type": "array", "elementType": _strip(type_["elementType"])}
        if kind == "map":
            return {"type": "map", "keyType": _strip(type_["keyType"]), "valueType": _strip(type_["valueType"])}
    return type_


def schema_differences(table: Schema, incoming: Schema, merge_schema: bool,
                       computed: Sequence[str] = ()) -> tuple[list[str], list[Field]]:
    """(differences that refuse the write, new columns to add when merging); the `computed`
    columns (generated, identity) may be missing whatever their nullability."""
    problems: list[str] = []
    new: list[Field] = []
    for f in incoming.fields:
        t = table.find(f.name)
        if t is None:
            if merge_schema:
                new.append(Field(f.name, f.type, True, f.metadata))
            else:
                problems.append(f"column {f.name!r} ({type_name(f.type)}) is not in the table")
            continue
        widens = isinstance(f.type, str) and isinstance(t.type, str) and (f.type, t.type) in _WIDENING
        if _strip(t.type) != _strip(f.type) and not widens:
            problems.append(f"column {f.name!r} is {type_name(f.type)} in the DataFrame but "
                            f"{type_name(t.type)} in the table")
    for t in table.fields:
        if incoming.find(t.name) is None and not t.nullable and t.name not in computed:
            problems.append(f"non-nullable column {t.name!r} is missing from the DataFrame")
    return problems, new


NOT_NULL_MARKER = "SKIPLAKE_NOT_NULL_VIOLATION"


def conform(df: DataFrame, table: Schema, keep: Sequence[str] = ()) -> DataFrame:
    """Select the table's columns in table order: rename to its spelling, widen types, fill missing
    nullable columns with NULL, and fail the job on a NULL in a non-nullable column. Columns
    named in `keep` that `df` has follow as they are (a rewrite's row id columns)."""
    by_lower = {c.lower(): c for c in df.columns}
    cols = []
    for f in table.fields:
        src = by_lower.get(f.name.lower())
        if src is None:
            cols.append(F.lit(None).cast(spark_type(f.type)).alias(f.name))
            continue
        c = F.col(f"`{src}`")
        current = df.schema[src].dataType
        if current.jsonValue() != spark_type(f.type).jsonValue():
            c = c.cast(spark_type(f.type))
        if not f.nullable:
            c = F.when(c.isNull(), F.raise_error(F.lit(f"{NOT_NULL_MARKER}: column {f.name} is NULL"))) \
                 .otherwise(c)
        cols.append(c.alias(f.name))
    cols += [F.col(f"`{k}`") for k in keep if k in df.columns]
    return df.select(*cols)


def as_schema(schema: "StructType | Schema | str", spark: "SparkSession | None" = None) -> Schema:
    """A skiplake Schema from a Spark StructType, a DDL string (`"id long, name string"`) or a Schema."""
    if isinstance(schema, Schema):
        return schema
    if isinstance(schema, StructType):
        return from_spark(schema)
    if isinstance(schema, str):
        if spark is not None:
            return from_spark(spark.createDataFrame([], schema).schema)
        struct = StructType.fromDDL(schema)
        if not isinstance(struct, StructType):  # a lone type (`"int"`) rather than a list of columns
            raise InvalidArgumentError(f"a DDL schema lists columns (\"id long, name string\"), not {schema!r}")
        return from_spark(struct)
    raise InvalidArgumentError(f"a schema must be a StructType, a DDL string or a skiplake Schema, not {type(schema)}")
