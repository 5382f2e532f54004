"""A Delta schema's collated strings become Spark's collated StringType, whichever way a writer
named the collation (with ICU's version, as Delta writes it, or without)."""
from __future__ import annotations

from skiplake.log.actions import Protocol
from skiplake.log.features import has_collations, required_protocol
from skiplake.log.schema import Schema
from skiplake.spark.session.spark_types import to_spark

SCHEMA = {"type": "struct", "fields": [
    {"name": "id", "type": "integer", "nullable": True, "metadata": {}},
    {"name": "s", "type": "string", "nullable": True, "metadata": {"__COLLATIONS": {"s": "icu.UNICODE_CI.75.1"}}},
    {"name": "m", "type": {"type": "map", "keyType": "string", "valueType": "string", "valueContainsNull": True},
     "nullable": True, "metadata": {"__COLLATIONS": {"m.value": "spark.UTF8_LCASE"}}},
]}


def test_collations_with_icu_versions_are_read():
    schema = Schema.from_json(SCHEMA)
    struct = to_spark(schema)
    assert struct["s"].dataType.collation == "UNICODE_CI"
    assert struct["m"].dataType.valueType.collation == "UTF8_LCASE"
    assert schema.to_json()["fields"][1]["metadata"]["__COLLATIONS"] == {"s": "icu.UNICODE_CI.75.1"}  # untouched


def test_collated_columns_need_the_collations_feature():
    schema = Schema.from_json(SCHEMA)
    assert has_collations(schema)
    protocol = required_protocol(Protocol(1, 2), {}, schema)
    assert {"collations-preview", "domainMetadata"} <= set(protocol.writerFeatures or ())
    plain = Schema.from_json({"type": "struct", "fields": SCHEMA["fields"][:1]})
    assert not has_collations(plain) and required_protocol(Protocol(1, 2), {}, plain) == Protocol(1, 2)
