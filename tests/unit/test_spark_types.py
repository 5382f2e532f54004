"""Spark types as skiplake spells them: the column list of a CREATE TABLE, and the write-time schema check."""
from skiplake.log.schema import Field, Schema
from skiplake.spark.session.spark_types import ddl, schema_differences


def test_ddl_quotes_every_name_and_spells_nested_types():
    schema = Schema.from_json({"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "my col", "type": "decimal(9,2)", "nullable": True, "metadata": {}},
        {"name": "a`b", "type": "timestamp_ntz", "nullable": True, "metadata": {}},
        {"name": "s", "type": {"type": "struct", "fields": [
            {"name": "x.y", "type": "integer", "nullable": True, "metadata": {}},
            {"name": "tags", "type": {"type": "array", "elementType": "string", "containsNull": True},
             "nullable": True, "metadata": {}}]}, "nullable": True, "metadata": {}},
        {"name": "m", "type": {"type": "map", "keyType": "string", "valueType": "double",
                               "valueContainsNull": True}, "nullable": True, "metadata": {}},
    ]})
    assert ddl(schema) == ("`id` bigint, `my col` decimal(9,2), `a``b` timestamp_ntz, "
                           "`s` struct<`x.y`:int,`tags`:array<string>>, `m` map<string,double>")


def test_a_primitive_or_null_column_for_a_nested_one_is_a_difference_not_a_crash():
    nested = {"type": "struct", "fields": [{"name": "a", "type": "integer", "nullable": True, "metadata": {}}]}
    table = Schema((Field("st", nested),))
    for incoming in ("void", "string"):
        problems, new = schema_differences(table, Schema((Field("st", incoming),)), merge_schema=False)
        assert new == [] and len(problems) == 1 and "struct<a:integer> in the table" in problems[0]
    problems, _ = schema_differences(Schema((Field("v", "long"),)), Schema((Field("v", "integer"),)), False)
    assert problems == []  # a lossless widening is accepted
