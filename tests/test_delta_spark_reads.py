"""delta-spark (the reference Delta Lake implementation) reads every table skiplake writes.

The module builds skiplake's own tables through every kind of commit and writer feature
(tests/interop_tables.py), and writes to copies of the golden tables delta-spark wrote
(tests/data/golden/); then delta-spark reads them all in one batch of jobs, in one JVM
(testing_support/delta_spark.py, started while skiplake builds), and each test compares with
what skiplake reads. The whole module is the slow tier's (delta-spark's JVM and its batch took
over two minutes of the gate): there the gate's live peer is delta-rs
(tests/test_deltalake_interop.py), and the tables delta-spark wrote are read from their committed
copies (tests/test_golden_tables.py). delta-spark writes nothing here: its writes to skiplake's
tables are tests/test_delta_spark_writes.py's.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import skiplake
from skiplake.log.location import bucket_and_key
from skiplake.spark.session.object_stores import bucket_hadoop_conf
from testing_support.delta_spark import DeltaSpark, rows_as_strings
from tests.golden import GOLDEN_DIR
from tests.interop_tables import (
    CDF_OURS,
    CDF_OURS_DV,
    CK_OURS,
    CL_COLUMNS,
    CL_OURS,
    CM_COLUMNS,
    CM_OURS,
    CM_OURS_COLUMNS,
    COLUMNS,
    DV_OURS,
    GEN_OURS,
    ID_OURS,
    PARTITION_BY,
    ROW_IDS_SQL,
    RT_OURS,
    SCHEMA,
    TIME_TRAVEL_STEPS,
    TW_COLUMNS,
    V2_OURS,
    V_COLUMNS,
    VARIANT_OURS,
    build_change_feed_tables,
    build_clustered_table,
    build_column_mapped,
    build_constraint_tables,
    build_dv_ours,
    build_feature_tables,
    build_main,
    build_row_tracking_table,
    changes_as_strings,
    changes_sql,
    cl_rows,
    frame,
    ids_of,
    quote_path,
    sort_rows,
)

pytestmark = [pytest.mark.spark, pytest.mark.delta_spark, pytest.mark.s3, pytest.mark.slow]

WSER = "wser"   # a table whose metaData.configuration says delta.isolationLevel = WriteSerializable


@dataclass
class Reads:
    lake: skiplake.Lake
    jobs: dict                                            # delta-spark's results by job id
    versions: dict[str, int] = field(default_factory=dict)   # main table: step -> version
    expected: dict[str, list] = field(default_factory=dict)  # table or query -> rows as skiplake reads them

    def job(self, job_id: str) -> dict:
        job = self.jobs[job_id]
        assert job["ok"], f"delta-spark failed: {job.get('error_class')}: {job.get('error')}\n{job.get('traceback')}"
        return job

    def rows(self, job_id: str) -> list[tuple]:
        return [tuple(r) for r in self.job(job_id)["rows"]]


def _read(name: str, path: str, columns, history: bool = False) -> dict:
    return {"id": name, "op": "read", "path": path, "columns": list(columns), "history": history}


def _query(name: str, sql: str) -> dict:
    return {"id": name, "op": "sql", "sql": sql}


# What each test needs built and read, by part: a part is one table or a group of tables that
# are built together, their rows as skiplake reads them, and delta-spark's jobs over them. The
# fixture builds only the parts of the tests selected (a test run alone builds what it reads).
S3_TABLE = "s3"   # a table of the lake on the S3-compatible test server: delta-spark reads it through S3A


def _build_main(spark, lake: skiplake.Lake, reads: Reads) -> None:
    reads.versions.update(build_main(spark, lake))
    reads.expected["main"] = rows_as_strings(lake.table("main").read(), COLUMNS)


def _build_wser(spark, lake: skiplake.Lake, reads: Reads) -> None:
    ws = lake.create_table(WSER, SCHEMA, partition_by=PARTITION_BY,
                           properties={"delta.isolationLevel": "WriteSerializable"})
    ws.append(frame(spark, range(0, 10)))
    reads.expected[WSER] = rows_as_strings(ws.read(), COLUMNS)


def _build_change_feeds(spark, lake: skiplake.Lake, reads: Reads) -> None:
    reads.expected.update({f"{n}:changes": rows for n, rows in build_change_feed_tables(spark, lake).items()})
    for n in (CDF_OURS, CDF_OURS_DV):
        reads.expected[n] = rows_as_strings(lake.table(n).read(), ["id", "part", "qty"])


def _build_constraints(spark, lake: skiplake.Lake, reads: Reads) -> None:
    build_constraint_tables(spark, lake)
    for name, columns in ((CK_OURS, ("id", "qty", "name")), (GEN_OURS, ("id", "ts", "d")), (ID_OURS, ("id", "name"))):
        reads.expected[name] = rows_as_strings(lake.table(name).read(), list(columns))


def _build_clustered(spark, lake: skiplake.Lake, reads: Reads) -> None:
    build_clustered_table(spark, lake)
    reads.expected[CL_OURS] = rows_as_strings(lake.table(CL_OURS).read(), list(CL_COLUMNS))


def _build_row_tracking(spark, lake: skiplake.Lake, reads: Reads) -> None:
    build_row_tracking_table(spark, lake)
    reads.expected[f"{RT_OURS}:ids"] = ids_of(lake.table(RT_OURS))


def _set(key: str, value):
    def build(spark, lake: skiplake.Lake, reads: Reads) -> None:
        reads.expected[key] = value(spark, lake)
    return build


# skiplake's own tables: part -> how it is built.
OURS = {
    "main": _build_main, WSER: _build_wser, DV_OURS: _set(DV_OURS, build_dv_ours),
    CM_OURS: _set(CM_OURS, build_column_mapped),
    "features": lambda spark, lake, reads: reads.expected.update(build_feature_tables(spark, lake)),
    "change_feeds": _build_change_feeds, "constraints": _build_constraints, CL_OURS: _build_clustered,
    RT_OURS: _build_row_tracking,
}


def _cm_name(spark, t) -> None:
    t.delete("id % 10 = 1")
    t.append(spark.sql("SELECT 5000L + id AS id, CAST(id % 3 AS INT) AS g, concat('a', id) AS s2, "
                       "named_struct('a', CAST(id AS INT), 'b', 'appended') AS st FROM range(6)"))


def _cdf_spark(spark, t) -> None:
    t.update("id % 5 = 3", {"qty": "qty - 1000"})
    t.delete("id % 5 = 4")


def _cl_spark(spark, t) -> None:
    t.optimize(target_file_size=2048, min_cube_size=1)
    t.append(cl_rows(spark, 350, 380))
    t.cluster_by(["k", "id"])


def _rt_spark(spark, t) -> None:
    t.append(spark.sql("SELECT id, CAST(id AS INT) AS v FROM range(10, 15)"))
    t.delete("id = 9")


def _dv_spark(spark, t) -> None:
    t.update("id % 17 = 0", {"s": "concat('ours', s)"})
    t.delete("g = 3 AND id < 1000")


def _appends(sql: str):
    return lambda spark, t: t.append(spark.sql(sql))


# The golden tables skiplake writes to (copies of them): the columns read back after, and what
# skiplake does to each.
THEIRS = {
    "cm_name": (CM_COLUMNS, _cm_name), "cdf_spark": (("id", "part", "qty"), _cdf_spark), "cl_spark": (CL_COLUMNS, _cl_spark),
    "rt_spark": (("id", "v"), _rt_spark),
    "tw_spark": (TW_COLUMNS, _appends("SELECT 7000000000L AS a, 0.5D AS f, CAST(1.5 AS DECIMAL(10,4)) AS d, "
                                      "DATE'2026-01-01' AS dt, 200000 AS b, 'ours' AS s")),
    "variant_spark": (V_COLUMNS, _appends("SELECT 99L AS id, parse_json('{\"k\":99}') AS v")),
    "ck_spark": (("id", "qty", "name"), _appends("SELECT 3L AS id, 3 AS qty, 'c' AS name")),
    "gen_spark": (("id", "ts", "d"), _appends("SELECT 2L AS id, TIMESTAMP'2024-02-06 04:00:00' AS ts")),
    "id_spark": (("id", "name"), _appends("SELECT 'd' AS name UNION ALL SELECT 'e'")),
    "dv_spark": (("id", "g", "s", "x"), _dv_spark),
}


def _write_to_theirs(spark, lake: skiplake.Lake, reads: Reads, name: str) -> None:
    """A copy of one of delta-spark's golden tables under the lake, changed by skiplake."""
    shutil.copytree(GOLDEN_DIR / name / "table", Path(lake.root) / name)
    columns, change = THEIRS[name]
    t = lake.table(name)
    change(spark, t)
    reads.expected[f"theirs:{name}"] = rows_as_strings(t.read(), list(columns))
    if name == "cdf_spark":
        reads.expected["cdf_spark:changes"] = changes_as_strings(t.changes(0))
    if name == "rt_spark":
        reads.expected["rt_spark:ids"] = ids_of(t)


def _build_on_s3(spark, s3_lake: skiplake.Lake, reads: Reads) -> str:
    """A partitioned table on the object store, after DML with deletion vectors; its path."""
    t = s3_lake.create_table("shared", "id long, p string, v double", partition_by=["p"],
                             properties={"delta.enableDeletionVectors": "true"})
    t.append(spark.sql("SELECT id, concat('p', id % 4) AS p, CAST(id / 3 AS DOUBLE) AS v FROM range(500)"))
    t.delete("id % 5 = 0")
    t.update("id = 7", set={"v": "-1.0"})
    reads.expected[S3_TABLE] = rows_as_strings(t.read(), ["id", "p", "v"])
    reads.versions[S3_TABLE] = t.version
    return s3_lake.path_of("shared")


def _jobs(lake: skiplake.Lake, reads: Reads, parts: set[str], s3_path: str | None) -> list[dict]:
    """delta-spark's jobs over the parts built."""
    jobs = [_read("main", lake.path_of("main"), COLUMNS, history=True)] if "main" in parts else []
    jobs += [{"id": f"main@{s}", "op": "read", "path": lake.path_of("main"), "version": reads.versions[s],
              "columns": COLUMNS} for s in TIME_TRAVEL_STEPS if f"main@{s}" in parts]
    reads_of = {WSER: [(WSER, COLUMNS)], DV_OURS: [(DV_OURS, COLUMNS)], CM_OURS: [(CM_OURS, CM_OURS_COLUMNS)],
                "features": [(V2_OURS, ("id", "g", "s")), (VARIANT_OURS, V_COLUMNS)],
                "constraints": [(CK_OURS, ("id", "qty", "name")), (GEN_OURS, ("id", "ts", "d")), (ID_OURS, ("id", "name"))],
                CL_OURS: [(CL_OURS, CL_COLUMNS)],
                "change_feeds": [(CDF_OURS, ("id", "part", "qty")), (CDF_OURS_DV, ("id", "part", "qty"))]}
    for part, tables in reads_of.items():
        if part in parts:
            jobs += [_read(n, lake.path_of(n), cols) for n, cols in tables]
    changed = [n for n in THEIRS if f"theirs:{n}" in parts]
    feeds = [n for n in (CDF_OURS, CDF_OURS_DV) if "change_feeds" in parts] + \
        (["cdf_spark"] if "cdf_spark" in changed else [])
    jobs += [_query(f"{n}:changes", changes_sql(lake.path_of(n))) for n in feeds]
    tracked = ([RT_OURS] if RT_OURS in parts else []) + (["rt_spark"] if "rt_spark" in changed else [])
    jobs += [_query(f"{n}:ids", ROW_IDS_SQL.replace("{t}", quote_path(lake.path_of(n)))) for n in tracked]
    detailed = [n for n, part in ((CL_OURS, CL_OURS), (CK_OURS, "constraints"), ("cl_spark", "theirs:cl_spark"))
                if part in parts]
    jobs += [{"id": f"{n}:detail", "op": "detail", "path": lake.path_of(n)} for n in detailed]
    jobs += [_read(f"theirs:{n}", lake.path_of(n), THEIRS[n][0]) for n in changed]
    if s3_path is not None:
        # delta-spark's S3 log store is chosen by the scheme: s3a:// as S3A reads it.
        jobs.append(_read(S3_TABLE, s3_path.replace("s3://", "s3a://", 1), ("id", "p", "v")))
    return jobs


# The parts each test reads (the parametrized ones add their parameter's part: see _parts_of).
NEEDS = {
    "test_delta_spark_reads_skiplakes_table_through_every_kind_of_commit": {"main"},
    "test_delta_spark_time_travel_matches_skiplake": {"main"},
    "test_delta_spark_reads_a_write_serializable_table": {WSER},
    "test_delta_spark_reads_skiplakes_deletion_vectors": {DV_OURS},
    "test_delta_spark_reads_skiplakes_column_mapping": {CM_OURS},
    "test_delta_spark_reads_skiplakes_v2_checkpoints_and_variants": {"features"},
    "test_delta_spark_reads_skiplakes_change_feed": {"change_feeds"},
    "test_delta_spark_reads_skiplakes_constraints_generated_and_identity_columns": {"constraints"},
    "test_delta_spark_reads_skiplakes_clustered_table": {CL_OURS},
    "test_delta_spark_reads_skiplakes_row_ids": {RT_OURS},
    "test_delta_spark_reads_what_skiplake_wrote_to_its_tables": set(),
    "test_delta_spark_reads_skiplakes_table_on_an_object_store": {S3_TABLE},
}


def _parts_of(item: pytest.Item) -> set[str]:
    parts = set(NEEDS[getattr(item, "originalname", item.name)])
    params = getattr(item, "callspec", None)
    params = params.params if params is not None else {}
    if "step" in params:
        parts.add(f"main@{params['step']}")
    if "name" in params and params["name"] in THEIRS:
        parts.add(f"theirs:{params['name']}")
    return parts


@pytest.fixture(scope="module")
def reads(request, spark, delta_spark: DeltaSpark, s3_server, tmp_path_factory) -> Reads:
    parts = set().union(*(_parts_of(i) for i in request.session.items if i.module is request.module))
    lake = skiplake.Lake(spark, str(tmp_path_factory.mktemp("delta_spark_reads") / "warehouse"))
    reads = Reads(lake, {})
    started = time.time()
    for part, build in OURS.items():
        if part in parts:
            build(spark, lake, reads)
    for name in THEIRS:
        if f"theirs:{name}" in parts:
            _write_to_theirs(spark, lake, reads, name)
    s3_path = hadoop = None
    if S3_TABLE in parts:
        s3_lake = skiplake.Lake(spark, f"s3://{s3_server.new_bucket()}/warehouse", storage_options=s3_server.options)
        s3_path = _build_on_s3(spark, s3_lake, reads)
        # S3A's per-bucket settings, as skiplake gives its own session for the bucket.
        hadoop = bucket_hadoop_conf(bucket_and_key(s3_path)[0], s3_server.options)
    built = time.time() - started
    delta_spark.check()
    result = delta_spark.run_batch(_jobs(lake, reads, parts, s3_path), hadoop=hadoop)
    print(f"\nskiplake's tables built in {built:.1f}s; delta-spark {result.get('delta_version')} read them in "
          f"{sum(j['seconds'] for j in result['jobs'].values()):.1f}s ({len(result['jobs'])} jobs)")
    reads.jobs = result["jobs"]
    return reads


def test_delta_spark_reads_skiplakes_table_through_every_kind_of_commit(reads: Reads) -> None:
    t = reads.lake.table("main")
    v = reads.versions
    assert t.version == v["append6"] == 13
    assert [v[s] for s in ("append1", "delete", "update_partition", "merge", "optimize", "append5")] == \
        [1, 4, 6, 8, 9, 10], f"every step must commit exactly once: {v}"
    log = Path(t.path) / "_delta_log"
    assert (log / f"{10:020d}.checkpoint.parquet").exists()
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 10
    job = reads.job("main")
    assert job["count"] == len(reads.expected["main"]) > 100
    assert reads.rows("main") == reads.expected["main"]
    assert job["version"] == t.version
    types = [(f["name"], f["type"]) for f in job["schema"]["fields"]]
    assert types == [(f["name"], f["type"]) for f in json.loads(t.schema.json())["fields"]]
    # DESCRIBE HISTORY sees every commit skiplake made, with skiplake's operation names.
    ops = {h["version"]: h["operation"] for h in job["history"]}
    assert sorted(ops) == list(range(t.version + 1))
    assert ops == {h["version"]: h.get("operation") for h in t.history()}
    assert ops[v["merge"]] == "MERGE" and ops[v["optimize"]] == "OPTIMIZE"
    assert ops[v["delete"]] == "DELETE" and ops[v["update"]] == "UPDATE"


@pytest.mark.parametrize("step", TIME_TRAVEL_STEPS)
def test_delta_spark_time_travel_matches_skiplake(reads: Reads, step: str) -> None:
    t = reads.lake.table("main")
    version = reads.versions[step]
    job = reads.job(f"main@{step}")
    assert job["version"] == version
    assert reads.rows(f"main@{step}") == rows_as_strings(t.read(version=version), COLUMNS)


def test_delta_spark_reads_a_write_serializable_table(reads: Reads) -> None:
    """skiplake writes delta.isolationLevel = WriteSerializable (delta-spark's own writes to such a
    table are the slow tier's); delta-spark reads the table as it is."""
    t = reads.lake.table(WSER)
    assert t.properties["delta.isolationLevel"] == "WriteSerializable"
    assert reads.rows(WSER) == reads.expected[WSER] and len(reads.expected[WSER]) == 10


def test_delta_spark_reads_skiplakes_deletion_vectors(reads: Reads) -> None:
    t = reads.lake.table(DV_OURS)
    assert any(f.deletionVector for f in t.snapshot.add_files), "skiplake wrote no deletion vector"
    assert reads.rows(DV_OURS) == reads.expected[DV_OURS]
    ids = sorted(int(r[0]) for r in reads.expected[DV_OURS])
    assert 0 not in ids and 130 > max(ids) >= 120 and all(i % 5 for i in ids if i < 100)


def test_delta_spark_reads_skiplakes_column_mapping(reads: Reads) -> None:
    """A table skiplake created with column mapping and changed by every kind of write (renames
    and a drop among them) reads the same in delta-spark, and in delta-rs."""
    expected = reads.expected[CM_OURS]
    assert reads.rows(CM_OURS) == expected
    ids = sorted(int(r[0]) for r in expected)
    assert 1000 in ids and 0 not in ids and 309 in ids
    assert any(r[2] == "S1" for r in expected) and any(r[2] == "m" for r in expected)
    deltalake = pytest.importorskip("deltalake")
    import pyarrow as pa
    got = pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(reads.lake.path_of(CM_OURS))).execute(
        "SELECT count(*) AS n, sum(id) AS s FROM t WHERE label <> 'm'").read_all()).to_pylist()[0]
    kept = [int(r[0]) for r in expected if r[2] != "m"]
    assert (got["n"], got["s"]) == (len(kept), sum(kept))


def test_delta_spark_reads_skiplakes_v2_checkpoints_and_variants(reads: Reads) -> None:
    for name in (V2_OURS, VARIANT_OURS):
        assert reads.rows(name) == reads.expected[name] and reads.expected[name]
    log = Path(reads.lake.path_of(V2_OURS)) / "_delta_log"
    assert any(p.name.startswith(f"{4:020d}.checkpoint.") for p in log.iterdir())
    assert list((log / "_sidecars").iterdir())


@pytest.mark.parametrize("name", [CDF_OURS, CDF_OURS_DV])
def test_delta_spark_reads_skiplakes_change_feed(reads: Reads, name: str) -> None:
    """delta-spark's table_changes over skiplake's DELETE, UPDATE, MERGE and replaceWhere gives
    what skiplake's own change read gives, commit timestamps included."""
    assert sort_rows(reads.rows(f"{name}:changes")) == reads.expected[f"{name}:changes"]
    assert {r[3] for r in reads.expected[f"{name}:changes"]} == {"insert", "delete", "update_preimage",
                                                                  "update_postimage"}
    assert reads.rows(name) == reads.expected[name]


def test_delta_spark_reads_skiplakes_constraints_generated_and_identity_columns(reads: Reads) -> None:
    for name in (CK_OURS, GEN_OURS, ID_OURS):
        assert reads.rows(name) == reads.expected[name], name
    detail = reads.job(f"{CK_OURS}:detail")["detail"]
    assert detail["properties"]["delta.constraints.qty_pos"] == "qty >= 0"
    assert "checkConstraints" in detail["tableFeatures"]


def test_delta_spark_reads_skiplakes_clustered_table(reads: Reads) -> None:
    assert reads.rows(CL_OURS) == reads.expected[CL_OURS]
    detail = reads.job(f"{CL_OURS}:detail")["detail"]
    assert detail["clusteringColumns"] == ["k", "id"] and "clustering" in detail["tableFeatures"]


def test_delta_spark_reads_skiplakes_row_ids(reads: Reads) -> None:
    ids = sorted(reads.rows(f"{RT_OURS}:ids"))
    assert ids == reads.expected[f"{RT_OURS}:ids"]
    # skiplake's UPDATE and DELETE kept the ids of the 20 rows first appended.
    assert len(ids) == 18 and len({r[1] for r in ids}) == 18 and all(int(r[1]) < 20 for r in ids)


@pytest.mark.parametrize("name", list(THEIRS))
def test_delta_spark_reads_what_skiplake_wrote_to_its_tables(reads: Reads, name: str) -> None:
    """delta-spark's own tables (the golden ones), after skiplake's DML, appends, OPTIMIZE and a
    change of clustering keys, read by delta-spark as skiplake reads them."""
    assert reads.rows(f"theirs:{name}") == reads.expected[f"theirs:{name}"]
    assert reads.lake.table(name).version > json.loads((GOLDEN_DIR / name / "expected.json").read_text())["version"]
    if name == "cdf_spark":
        assert sort_rows(reads.rows("cdf_spark:changes")) == reads.expected["cdf_spark:changes"]
    if name == "rt_spark":
        assert sorted(reads.rows("rt_spark:ids")) == reads.expected["rt_spark:ids"]
    if name == "cl_spark":
        assert reads.job("cl_spark:detail")["detail"]["clusteringColumns"] == ["k", "id"]


def test_delta_spark_reads_skiplakes_table_on_an_object_store(reads: Reads) -> None:
    """delta-spark 4.4 (its own JVM, S3A from the same packages) reads a skiplake table on the
    S3-compatible store, partitioned, after DML with deletion vectors, with identical rows."""
    job = reads.job(S3_TABLE)
    assert job["count"] == 400 and job["version"] == reads.versions[S3_TABLE] == 3
    assert reads.rows(S3_TABLE) == reads.expected[S3_TABLE]
