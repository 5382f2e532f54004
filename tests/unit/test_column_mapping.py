"""Column mapping's translations between logical and physical names (no Spark)."""
from __future__ import annotations

import json

import pytest

from skiplake.log.actions import Protocol
from skiplake.log.column_mapping import (
    ID,
    PARQUET_FIELD_ID,
    PHYSICAL_NAME,
    assign,
    logical_partition_values,
    logical_stats,
    mapping_mode,
    physical_names,
    physical_schema,
)
from skiplake.log.schema import Schema


def _meta(i: int, phys: str) -> dict:
    return {ID: i, PHYSICAL_NAME: phys}


# A schema as delta-spark writes it with column mapping: PROTOCOL.md's nested example (e, an
# array of structs with d), a struct, a renamed column (logical "amount", physical "col-b"), and
# a partition column.
SCHEMA = Schema.from_json({"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": _meta(1, "col-a")},
    {"name": "amount", "type": "decimal(9,2)", "nullable": True, "metadata": _meta(2, "col-b")},
    {"name": "s", "type": {"type": "struct", "fields": [
        {"name": "x", "type": "integer", "nullable": True, "metadata": _meta(3, "col-c")}]},
     "nullable": True, "metadata": _meta(6, "col-s")},
    {"name": "e", "type": {"type": "array", "containsNull": True, "elementType": {"type": "struct", "fields": [
        {"name": "d", "type": "integer", "nullable": False,
         "metadata": _meta(5, "col-a7f4159c-53be-4cb0-b81a-f7e5240cfc49")}]}},
     "nullable": True, "metadata": _meta(4, "col-5f422f40-de70-45b2-88ab-1d5c90e94db1")},
    {"name": "day", "type": "date", "nullable": True, "metadata": _meta(7, "col-p")},
]})


@pytest.mark.parametrize("protocol,mode", [
    (Protocol(2, 5), "name"),
    (Protocol(3, 7, ("columnMapping",), ("columnMapping",)), "name"),
    (Protocol(3, 7, ("deletionVectors",), ("deletionVectors",)), "none"),  # the feature not listed
    (Protocol(1, 2), "none"),
])
def test_the_mode_is_honoured_only_when_the_protocol_supports_it(protocol, mode):
    assert mapping_mode({"delta.columnMapping.mode": "name"}, protocol) == mode
    assert mapping_mode({}, protocol) == "none"
    with pytest.raises(ValueError, match="columnMapping.mode"):
        mapping_mode({"delta.columnMapping.mode": "nonsense"}, Protocol(2, 5))


def test_the_physical_schema_renames_every_level_and_carries_field_ids():
    phys = physical_schema(SCHEMA, "name")
    assert phys.names == ["col-a", "col-b", "col-s", "col-5f422f40-de70-45b2-88ab-1d5c90e94db1", "col-p"]
    assert [f.metadata[PARQUET_FIELD_ID] for f in phys.fields] == [1, 2, 6, 4, 7]
    struct = phys.fields[2].type["fields"][0]
    assert (struct["name"], struct["metadata"]) == ("col-c", {PARQUET_FIELD_ID: 3})
    element = phys.fields[3].type["elementType"]["fields"][0]
    assert element["name"] == "col-a7f4159c-53be-4cb0-b81a-f7e5240cfc49" and element["nullable"] is False
    assert physical_schema(SCHEMA, "none") is SCHEMA
    assert physical_names(SCHEMA, "name")["amount"] == "col-b"


def test_stats_and_partition_values_come_back_under_logical_names():
    stats = json.loads('{"numRecords": 3, "minValues": {"col-a": 1, "col-b": 0.10, "col-s": {"col-c": 4}, '
                       '"col-gone": 9}, "maxValues": {"col-a": 7}, "nullCount": {"col-a": 0, "col-s": {"col-c": 1}}}')
    got = logical_stats(stats, SCHEMA, "name")
    assert got["minValues"] == {"id": 1, "amount": 0.10, "s": {"x": 4}}  # a dropped column's stats left out
    assert got["maxValues"] == {"id": 7} and got["nullCount"] == {"id": 0, "s": {"x": 1}}
    assert got["numRecords"] == 3
    assert logical_partition_values({"col-p": "2024-01-01"}, SCHEMA, ["day"], "name") == {"day": "2024-01-01"}


def test_assign_gives_new_fields_ids_and_physical_names_and_keeps_old_ones():
    plain = Schema.from_json({"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": _meta(1, "col-a")},
        {"name": "t", "type": {"type": "struct", "fields": [
            {"name": "u", "type": "string", "nullable": True, "metadata": {}}]}, "nullable": True, "metadata": {}}]})
    out, max_id = assign(plain, 1)
    assert max_id == 3
    assert out.fields[0].metadata == _meta(1, "col-a")
    assert out.fields[1].metadata[ID] == 2 and out.fields[1].metadata[PHYSICAL_NAME].startswith("col-")
    child = out.fields[1].type["fields"][0]["metadata"]
    assert child[ID] == 3 and child[PHYSICAL_NAME] != out.fields[1].metadata[PHYSICAL_NAME]
    assert physical_schema(out, "id").fields[1].metadata == {PARQUET_FIELD_ID: 2}


def test_a_files_table_gets_logical_keys_exactly():
    import pyarrow as pa

    from skiplake.log.arrow_schema import FILES_SCHEMA
    from skiplake.log.column_mapping import logical_files
    stats = '{"numRecords":2,"minValues":{"col-a":1,"col-b":12345678901234567.89,"col-s":{"col-c":"col-a\\":"}}}'
    files = pa.Table.from_pylist([{"path": "x.parquet", "partitionValues": [("col-p", "2024-01-01")], "size": 1,
                                   "modificationTime": 0, "dataChange": True, "stats": stats}], schema=FILES_SCHEMA)
    out = logical_files(files, SCHEMA, ["day"], "name").to_pylist()[0]
    assert out["partitionValues"] == [("day", "2024-01-01")]
    # Keys renamed at every level; values untouched, digits and all (a string value that looks
    # like a key included).
    assert out["stats"] == '{"numRecords":2,"minValues":{"id":1,"amount":12345678901234567.89,"s":{"x":"col-a\\":"}}}'
    assert logical_files(files, SCHEMA, ["day"], "none") is files


def test_a_schema_from_another_mapped_table_gets_its_own_names():
    """Ids and physical names that came with a schema (another table's) are not kept."""
    from skiplake.log.column_mapping import MAX_COLUMN_ID, configure, extend
    from skiplake.log.schema import Field as F
    from skiplake.log.schema import Schema as S
    other = {"delta.columnMapping.id": 7, "delta.columnMapping.physicalName": "col-other", "parquet.field.id": 7}
    nested = {"type": "struct", "fields": [{"name": "a", "type": "integer", "nullable": True, "metadata": dict(other)}]}
    schema = S((F("x", "long", True, dict(other)), F("st", nested, True, {"comment": "kept"})))
    mapped, config = configure(schema, {"delta.columnMapping.mode": "name"}, "none", new_table=True)
    ids = [mapped.fields[0].metadata["delta.columnMapping.id"], mapped.fields[1].metadata["delta.columnMapping.id"],
           mapped.fields[1].type["fields"][0]["metadata"]["delta.columnMapping.id"]]
    assert sorted(ids) == [1, 2, 3] and config[MAX_COLUMN_ID] == "3"
    assert "col-other" not in str(mapped.to_json()) and mapped.fields[1].metadata["comment"] == "kept"
    # On an existing table taking name mode, the physical name is the column's own.
    kept, _ = configure(schema, {"delta.columnMapping.mode": "name"}, "none", new_table=False)
    assert kept.fields[0].metadata["delta.columnMapping.physicalName"] == "x"
    # New columns get ids past every id in use.
    grown, config = extend(S(mapped.fields + (F("y", "long"),)), config)
    assert grown.fields[2].metadata["delta.columnMapping.id"] == 4 and config[MAX_COLUMN_ID] == "4"


def test_stats_renamed_by_structure_keep_every_digit():
    """When one physical name means two columns (a table that took name mode, with a field `a`
    at the top and inside a struct), stats are renamed by structure, numbers unrounded."""
    import json

    import pyarrow as pa

    from skiplake.log.arrow_schema import FILES_SCHEMA
    from skiplake.log.column_mapping import logical_files
    from skiplake.log.schema import Field as F
    from skiplake.log.schema import Schema as S

    def meta(name, i):
        return {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": name}
    inner = {"type": "struct", "fields": [{"name": "a", "type": "decimal(38,18)", "nullable": True,
                                           "metadata": meta("a", 3)}]}
    schema = S((F("renamed", "decimal(38,18)", True, meta("a", 1)), F("st", inner, True, meta("st", 2))))
    stats = '{"numRecords":1,"minValues":{"a":1.000000000000000001,"st":{"a":2.000000000000000002}}}'
    files = pa.Table.from_pylist([{"path": "x.parquet", "partitionValues": [], "size": 1, "modificationTime": 0,
                                   "dataChange": True, "stats": stats}], schema=FILES_SCHEMA)
    out = logical_files(files, schema, [], "name").to_pylist()[0]["stats"]
    assert '"renamed":1.000000000000000001' in out and '"a":2.000000000000000002' in out
    assert json.loads(out)["minValues"]["st"] == {"a": 2.000000000000000002}
