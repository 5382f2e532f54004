"""The column list skiplake writes into a Spark CREATE TABLE (bucketed catalog tables under Spark Connect)."""
from skiplake.log.schema import Schema
from skiplake.spark.types import ddl


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
                           "`s` STRUCT<`x.y`: int, `tags`: ARRAY<string>>, `m` MAP<string, double>")
