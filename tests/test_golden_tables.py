"""skiplake reads the tables delta-spark 4.4 wrote as delta-spark read them, and writes to them.

The golden tables (tests/interop_tables.GOLDEN_TABLES: deletion vectors, column mapping, v2
checkpoints with sidecars, type widening, variant, the change feed, row tracking, clustering,
constraints, generated and identity columns, every kind of commit) are written by delta-spark
once, by `make golden`, and committed under tests/data/golden/ with what delta-spark read from
each: the rows, the schema, DESCRIBE DETAIL and HISTORY, older versions and other queries. In the
gate they are read from there, without starting delta-spark. In the slow tier (`live`)
delta-spark writes them again into a temporary folder, and every check runs on those too.

A test that writes copies the table first: the committed tables stay as delta-spark left them.
"""
from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

import skiplake
from skiplake.errors import ConstraintViolationError, ProtocolNotSupportedError
from skiplake.log.actions import AddFile
from skiplake.log.snapshot import log_storage, read_commit
from testing_support.delta_spark import rows_as_strings
from tests.golden import GOLDEN_DIR, generate, load
from tests.interop_tables import CDF_COLUMNS, CM_COLUMNS, GOLDEN, GOLDEN_TABLES, TW_COLUMNS, cl_rows, ids_of, sort_rows

pytestmark = pytest.mark.spark

SOURCES = ["committed", pytest.param("live", marks=[pytest.mark.slow, pytest.mark.delta_spark])]
NAMES = sorted(GOLDEN)
# DESCRIBE DETAIL's fields a reader of the same log must agree on (location and file times aside).
DETAIL_FIELDS = ("format", "id", "name", "description", "createdAt", "partitionColumns", "clusteringColumns",
                 "numFiles", "sizeInBytes", "properties", "minReaderVersion", "minWriterVersion")


@dataclass
class Golden:
    source: str
    root: Path                  # <root>/<name>/table is each table
    records: dict[str, dict]    # what delta-spark read from each (expected.json)

    def path(self, name: str) -> str:
        return str(self.root / name / "table")

    def copy(self, name: str, where: Path) -> str:
        """A copy of the table to write to."""
        target = where / name
        shutil.copytree(self.path(name), target)
        return str(target)


@pytest.fixture(scope="module", params=SOURCES)
def golden(request, tmp_path_factory) -> Golden:
    if request.param == "committed":
        missing = [n for n in NAMES if not (GOLDEN_DIR / n / "expected.json").exists()]
        assert not missing, f"golden tables missing under {GOLDEN_DIR}: {missing} (`make golden` writes them)"
        return Golden("committed", GOLDEN_DIR, {n: load(n) for n in NAMES})
    delta = request.getfixturevalue("delta_spark")
    delta.check()
    root = tmp_path_factory.mktemp("golden_live")
    return Golden("live", root, generate(root, list(GOLDEN_TABLES), delta))


def _type_names(schema_json: dict) -> list[tuple[str, str]]:
    return [(f["name"], f["type"] if isinstance(f["type"], str) else json.dumps(f["type"]))
            for f in schema_json["fields"]]


def _tuples(rows: list) -> list[tuple]:
    return [tuple(r) for r in rows]


# ---------------------------------------------------------------- every table


@pytest.mark.parametrize("name", NAMES)
def test_skiplake_reads_what_delta_spark_read(spark, golden: Golden, name: str) -> None:
    expected = golden.records[name]
    t = skiplake.Table.open(spark, golden.path(name))
    assert t.version == expected["version"]
    df = t.read()
    assert df.columns == expected["columns"]
    assert rows_as_strings(df, expected["columns"]) == _tuples(expected["rows"])
    assert _type_names(json.loads(df.schema.json())) == _type_names(expected["schema"])   # what a reader sees
    ours = {h["version"]: h.get("operation") for h in t.history()}
    assert ours == {h["version"]: h["operation"] for h in expected["history"]}


@pytest.mark.parametrize("name", NAMES)
def test_describe_detail_is_delta_sparks(spark, golden: Golden, name: str) -> None:
    expected = golden.records[name]["detail"]
    ours = skiplake.Table.open(spark, golden.path(name)).detail()
    detail = ours.to_dict()
    # delta-spark's time as epoch milliseconds (tests/golden.py records it so)
    detail["createdAt"] = round(ours.created_at.timestamp() * 1000) if ours.created_at else None
    assert {k: detail[k] for k in DETAIL_FIELDS} == {k: expected[k] for k in DETAIL_FIELDS}
    # delta-spark names the features a legacy protocol implies as well; skiplake names the same.
    assert sorted(detail["tableFeatures"]) == sorted(expected["tableFeatures"])


@pytest.mark.parametrize("name", [g.name for g in GOLDEN_TABLES if g.versions])
def test_time_travel_reads_what_delta_spark_read(spark, golden: Golden, name: str) -> None:
    t = skiplake.Table.open(spark, golden.path(name))
    for version, expected in golden.records[name]["versions"].items():
        df = t.read(version=int(version))
        assert df.columns == expected["columns"], version
        assert rows_as_strings(df, expected["columns"]) == _tuples(expected["rows"]), version


def test_the_golden_tables_are_small_and_cover_every_feature(golden: Golden) -> None:
    """The committed tables stay within 20 MB, and between them hold every reader-writer feature
    skiplake reads from other writers."""
    size = sum(p.stat().st_size for p in golden.root.rglob("*") if p.is_file())
    assert size < 20_000_000, f"{size:,} bytes under {golden.root}"
    features = {f for r in golden.records.values() for f in r["detail"]["tableFeatures"]}
    assert {"deletionVectors", "columnMapping", "v2Checkpoint", "typeWidening", "variantType",
            "variantShredding-preview", "changeDataFeed", "rowTracking", "clustering", "checkConstraints",
            "generatedColumns", "identityColumns", "domainMetadata"} <= features, sorted(features)


@pytest.mark.slow
def test_delta_spark_today_writes_what_is_committed(golden: Golden) -> None:
    """The live tables read as the committed ones: the same delta-spark behaviour (a newer
    delta-spark that writes otherwise shows here, and `make golden` then records it)."""
    if golden.source != "live":
        pytest.skip("compares a live run with the committed tables")
    for name in NAMES:
        committed, live = load(name), golden.records[name]
        for key in ("columns", "rows", "schema", "version", "history", "versions", "queries"):
            assert live[key] == committed[key], (name, key)
        for key in ("partitionColumns", "clusteringColumns", "tableFeatures", "numFiles"):
            assert live["detail"][key] == committed["detail"][key], (name, key)
        # Row tracking names its materialized columns with a new UUID each time.
        assert _without_uuids(live["detail"]["properties"]) == _without_uuids(committed["detail"]["properties"]), name


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _without_uuids(properties: dict[str, str]) -> dict[str, str]:
    return {k: UUID.sub("<uuid>", v) for k, v in properties.items()}


# ---------------------------------------------------------------- deletion vectors


@pytest.mark.parametrize("name", ["dv_spark", "dv_spark_parted"])
def test_deletion_vectors_drop_their_rows_everywhere(spark, golden: Golden, name: str, tmp_path) -> None:
    t = skiplake.Table.open(spark, golden.path(name))
    assert "deletionVectors" in (t.snapshot.protocol.readerFeatures or ())
    assert any(f.deletionVector for f in t.snapshot.add_files), "no deletion vector: the test would prove nothing"
    assert any(p.name.endswith(".checkpoint.parquet") for p in (Path(t.path) / "_delta_log").iterdir())
    alive = [i for i in range(3000) if i % 7 and i % 11 and i != 5]
    ours = rows_as_strings(t.read(), ["id", "g", "s", "x"])
    assert sorted(int(r[0]) for r in ours) == alive
    assert sorted(int(r[0]) for r in ours if r[2].startswith("u")) == [i for i in alive if i % 13 == 0]
    # Reports count logical rows; pruned reads and lake.sql drop the same rows.
    assert t.scan().report.rows_total == len(alive)
    assert sorted(r.id for r in t.read("id < 100 AND g = 1").collect()) == [i for i in alive if i < 100 and i % 4 == 1]
    lake = skiplake.Lake(spark, str(tmp_path / "lake"))
    golden.copy(name, tmp_path / "lake")
    count = lake.sql(f"SELECT count(*) AS n, sum(id) AS s FROM {name} WHERE g IN (0, 2)").collect()[0]
    picked = [i for i in alive if i % 4 in (0, 2)]
    assert (count.n, count.s) == (len(picked), sum(picked))


# ---------------------------------------------------------------- column mapping


@pytest.mark.parametrize("name", ["cm_name", "cm_id"])
def test_column_mapping_reads_prunes_and_writes_under_physical_names(spark, golden: Golden, name: str,
                                                                     tmp_path) -> None:
    t = skiplake.Table.open(spark, golden.copy(name, tmp_path / "lake"))
    assert t.snapshot.column_mapping == name.removeprefix("cm_")
    assert t.read().columns == list(CM_COLUMNS)   # logical names: renamed s2, dropped x gone
    rows = t.read().count()
    assert rows == sum(1 for i in range(700) if i >= 600 or i % 7)
    # Skipping by stats and partition values kept under physical names in the log.
    plan = t.scan("g = 1 AND id >= 600")
    assert plan.report.files_selected < plan.report.files_total
    got = sorted(r.id for r in t.read("g = 1 AND id >= 600 AND s2 LIKE 'n%'").collect())
    assert got == [i for i in range(600, 700) if i % 3 == 1]
    assert sorted(r.a for r in t.read("id = 11").select("st.a").collect()) == [1]
    assert t.read("st.b = 'b12'").count() == 1
    lake = skiplake.Lake(spark, str(tmp_path / "lake"))
    assert lake.sql(f"SELECT count(*) AS n FROM {name} WHERE st.b = 'b12' AND g = 0").collect()[0].n == 1
    # skiplake's DELETE on delta-spark's table marks the row with a deletion vector.
    t.delete("id = 1")
    assert t.read("id = 1").count() == 0 and t.read().count() == rows - 1
    assert any(isinstance(a, AddFile) and a.deletionVector for a in read_commit(log_storage(t.path), t.version))
    # Appends are written under the physical names, with partition values and stats keyed so.
    t.append(spark.sql("SELECT 5000L + id AS id, CAST(id % 3 AS INT) AS g, concat('a', id) AS s2, "
                       "named_struct('a', CAST(id AS INT), 'b', 'appended') AS st FROM range(6)"))
    adds = [a for a in read_commit(log_storage(t.path), t.version) if isinstance(a, AddFile)]
    phys = {f.name: f.metadata["delta.columnMapping.physicalName"] for f in t.snapshot.schema.fields}
    assert adds and all(set(a.partitionValues) == {phys["g"]} for a in adds)
    assert all(phys["id"] in json.loads(a.stats)["minValues"] for a in adds)
    assert sorted(r.id for r in t.read("st.b = 'appended'").collect()) == list(range(5000, 5006))
    assert t.read().count() == rows - 1 + 6
    assert t.scan("id >= 5000").report.files_selected < t.scan().report.files_total
    # delta-rs (DataFusion) reads the table with skiplake's writes, under the logical names.
    deltalake = pytest.importorskip("deltalake")
    import pyarrow as pa
    got = pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(t.path)).execute(
        "SELECT count(*) AS n, sum(id) AS s FROM t WHERE s2 LIKE 'a%'").read_all()).to_pylist()[0]
    assert (got["n"], got["s"]) == (6, sum(range(5000, 5006)))


# ---------------------------------------------------------------- v2 checkpoints, type widening, variant


@pytest.mark.parametrize("name,suffix", [("v2ck_spark", ".parquet"), ("v2ck_json_spark", ".json")])
def test_v2_checkpoints_with_sidecars_are_read(spark, golden: Golden, name: str, suffix: str) -> None:
    t = skiplake.Table.open(spark, golden.path(name))
    log = Path(t.path) / "_delta_log"
    uuid_named = [p for p in log.iterdir() if ".checkpoint." in p.name and p.name.endswith(suffix)
                  and not p.name.endswith(".checkpoint.parquet")]
    assert uuid_named and list((log / "_sidecars").iterdir()), sorted(p.name for p in log.iterdir())
    assert "v2Checkpoint" in t.detail().table_features
    assert sorted(r.id for r in t.read().collect()) == [i for i in range(300) if i % 7]
    assert t.scan("g = 1").report.files_selected < t.scan().report.files_selected


def test_planning_a_type_widened_table_keeps_every_matching_row(spark, golden: Golden) -> None:
    """Older files' stats are in the old type: a float's stat read as a double is not the value
    the file holds, yet a predicate at that value must still find the row."""
    t = skiplake.Table.open(spark, golden.path("tw_spark"))
    changes = {f["name"]: f["metadata"].get("delta.typeChanges") for f in json.loads(t.schema.json())["fields"]}
    assert changes["a"] and changes["f"] and changes["d"] and changes["b"]
    everything = t.read()
    for where in ("f >= CAST(CAST(4.4 AS FLOAT) AS DOUBLE)", "f <= CAST(CAST(3.3 AS FLOAT) AS DOUBLE)",
                  "a > 11", "a = 5000000003", "d >= 2.75", "b >= 100000", "b = 11", "dt = DATE'2024-01-03'"):
        assert t.read(where=where).count() == everything.filter(where).count() > 0, where
    assert t.scan(where="a > 1000").report.files_selected < t.scan().report.files_selected


def test_skiplake_writes_to_widened_and_variant_tables(spark, golden: Golden, tmp_path) -> None:
    tw = skiplake.Table.open(spark, golden.copy("tw_spark", tmp_path))
    before = tw.read().count()
    tw.append(spark.sql("SELECT 7000000000L AS a, 0.5D AS f, CAST(1.5 AS DECIMAL(10,4)) AS d, DATE'2026-01-01' AS dt, "
                        "200000 AS b, 'ours' AS s"))
    assert tw.read().count() == before + 1 and tw.read(where="a = 7000000000").count() == 1
    assert rows_as_strings(tw.read(where="a < 7000000000"), list(TW_COLUMNS)) == _tuples(
        golden.records["tw_spark"]["rows"])
    changes = {f["name"]: f["metadata"].get("delta.typeChanges") for f in json.loads(tw.schema.json())["fields"]}
    assert changes["a"], "the record of past type changes is kept"
    var = skiplake.Table.open(spark, golden.copy("variant_spark", tmp_path))
    var.append(spark.sql("SELECT 99L AS id, parse_json('{\"k\":99}') AS v"))
    got = var.read(where="id = 99").selectExpr("variant_get(v, '$.k', 'int') AS k").collect()
    assert [r.k for r in got] == [99]
    # Shredded variants are read (every value, from the shredded columns too), not written.
    shredded = skiplake.Table.open(spark, golden.copy("shred_spark", tmp_path))
    keys = shredded.read().selectExpr("variant_get(v, '$.k', 'int') AS k", "variant_get(v, '$.t', 'string') AS t")
    assert sorted((r.k, r.t) for r in keys.collect()) == [(i, f"x{i}") for i in range(30)]
    with pytest.raises(ProtocolNotSupportedError, match="variantShredding"):
        shredded.append(spark.sql("SELECT 99L AS id, parse_json('{\"k\":99}') AS v"))
    assert skiplake.Table.open(spark, shredded.path).version == golden.records["shred_spark"]["version"]


# ---------------------------------------------------------------- change feed, row tracking


def test_the_change_feed_is_delta_sparks_and_skiplake_extends_it(spark, golden: Golden, tmp_path) -> None:
    expected = _tuples(golden.records["cdf_spark"]["queries"]["changes"])
    t = skiplake.Table.open(spark, golden.copy("cdf_spark", tmp_path))
    assert rows_as_strings(t.changes(0), CDF_COLUMNS[:-1]) == expected
    kinds = {r[3] for r in expected}
    assert kinds == {"insert", "delete", "update_preimage", "update_postimage"}
    version = t.version
    t.update("id % 5 = 3", {"qty": "qty - 1000"})
    t.delete("id % 5 = 4")
    ours = t.changes(version + 1).collect()
    before, after = t.read(version=version), t.read()
    assert sum(r["_change_type"] == "update_preimage" for r in ours) == before.filter("id % 5 = 3").count() > 0
    assert sum(r["_change_type"] == "delete" for r in ours) == before.filter("id % 5 = 4").count() > 0
    assert after.count() == before.count() - before.filter("id % 5 = 4").count()
    # delta-spark's part of the feed reads the same after skiplake's commits.
    assert rows_as_strings(t.changes(0, version), CDF_COLUMNS[:-1]) == expected


def test_row_ids_are_delta_sparks_and_skiplake_assigns_past_them(spark, golden: Golden, tmp_path) -> None:
    theirs = sort_rows(golden.records["rt_spark"]["queries"]["row_ids"])
    t = skiplake.Table.open(spark, golden.copy("rt_spark", tmp_path))
    assert ids_of(t) == sorted(theirs) and len(theirs) == 10
    t.append(spark.sql("SELECT id, CAST(id AS INT) AS v FROM range(10, 15)"))
    t.delete("id = 9")
    after = ids_of(t)
    assert [r for r in after if int(r[0]) < 9] == [r for r in sorted(theirs) if int(r[0]) < 9]
    ids = [int(r[1]) for r in after]
    assert len(after) == 14 and len(set(ids)) == 14
    assert min(int(r[1]) for r in after if int(r[0]) >= 10) > max(int(r[1]) for r in theirs)


# ---------------------------------------------------------------- constraints, generated and identity columns


def test_skiplake_keeps_delta_sparks_constraints(spark, golden: Golden, tmp_path) -> None:
    t = skiplake.Table.open(spark, golden.copy("ck_spark", tmp_path))
    assert t.constraints == {"qty_pos": "qty >= 0"}
    with pytest.raises(ConstraintViolationError, match="qty_pos"):
        t.append(spark.sql("SELECT 3L AS id, -3 AS qty, 'c' AS name"))
    with pytest.raises(ConstraintViolationError, match="NOT NULL"):
        t.append(spark.sql("SELECT CAST(NULL AS BIGINT) AS id, 3 AS qty, 'c' AS name"))
    assert t.version == golden.records["ck_spark"]["version"]   # refused commits leave nothing
    t.append(spark.sql("SELECT 3L AS id, 3 AS qty, 'c' AS name"))
    assert sorted(r.id for r in t.read().collect()) == [1, 2, 3]


def test_skiplake_computes_delta_sparks_generated_column(spark, golden: Golden, tmp_path) -> None:
    t = skiplake.Table.open(spark, golden.copy("gen_spark", tmp_path))
    t.append(spark.sql("SELECT 2L AS id, TIMESTAMP'2024-02-06 04:00:00' AS ts"))
    with pytest.raises(ConstraintViolationError, match="generated column d"):
        t.append(spark.sql("SELECT 3L AS id, TIMESTAMP'2024-02-06 04:00:00' AS ts, DATE'2000-01-01' AS d"))
    assert {r.id: str(r.d) for r in t.read().collect()} == {1: "2024-01-05", 2: "2024-02-06"}
    assert t.scan("d = DATE'2024-02-06'").report.files_selected == 1


def test_skiplake_continues_delta_sparks_identity_column(spark, golden: Golden, tmp_path) -> None:
    t = skiplake.Table.open(spark, golden.copy("id_spark", tmp_path))
    before = [r.id for r in t.read().collect()]
    assert sorted(before) == [5, 8, 11]
    t.append(spark.sql("SELECT 'd' AS name UNION ALL SELECT 'e'"))
    after = [r.id for r in t.read().collect()]
    added = sorted(set(after) - set(before))
    assert len(after) == len(set(after)) == 5 and min(added) > max(before)
    assert all((v - 5) % 3 == 0 for v in after)


# ---------------------------------------------------------------- clustering


def test_skiplake_clusters_delta_sparks_table(spark, golden: Golden, tmp_path) -> None:
    """skiplake reads delta-spark's clustering columns, keeps its cube, clusters the rows of its
    last INSERT into a new cube, and changes the keys."""
    t = skiplake.Table.open(spark, golden.copy("cl_spark", tmp_path))
    assert t.clustering_columns == ["k"] and t.detail().clustering_columns == ["k"]
    files = t.snapshot.add_files
    assert any(f.clusteringProvider == "liquid" and "ZCUBE_ID" in (f.tags or {}) for f in files)
    result = t.optimize(target_file_size=2048, min_cube_size=1)
    assert result.files_removed >= 1
    assert {f.path for f in files if f.clusteringProvider} <= {f.path for f in t.snapshot.add_files}
    t.append(cl_rows(spark, 350, 380))
    t.cluster_by(["k", "id"])
    assert t.clustering_columns == ["k", "id"]
    assert sorted(r.id for r in t.read().collect()) == list(range(380))
