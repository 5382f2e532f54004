"""delta-spark writes to skiplake's tables, and skiplake reads what it wrote (the slow tier).

skiplake builds its tables (tests/interop_tables.py) and clusters a copy of delta-spark's golden
clustered table; then delta-spark, in one batch, appends and deletes (past a checkpoint of its
own), appends at skiplake's WriteSerializable level, runs DML on skiplake's change feed tables,
inserts good and bad rows into tables with skiplake's constraints, generated and identity
columns, OPTIMIZEs skiplake's clustered tables and inserts rows under skiplake's row ids. Each
test then checks what skiplake reads. delta-spark's reads of skiplake's tables are the gate's
(tests/test_delta_spark_reads.py).
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

import skiplake
from testing_support.delta_spark import DeltaSpark, rows_as_strings
from tests.golden import GOLDEN_DIR
from tests.interop_tables import (
    CDF_OURS,
    CDF_OURS_DV,
    CK_OURS,
    CL_COLUMNS,
    CL_OURS,
    COLUMNS,
    GEN_OURS,
    ID_OURS,
    PARTITION_BY,
    ROW_IDS_SQL,
    RT_OURS,
    SCHEMA,
    build_change_feed_tables,
    build_clustered_table,
    build_constraint_tables,
    build_row_tracking_table,
    changes_as_strings,
    changes_sql,
    cl_rows,
    cl_values,
    frame,
    ids_of,
    quote_path,
    select_sql,
    sort_rows,
)

pytestmark = [pytest.mark.spark, pytest.mark.delta_spark, pytest.mark.slow]

DELETE_WHERE_DS = "qty > 15 OR region = 'south east'"   # the DELETE delta-spark runs on "written"
WRITTEN_IDS = list(range(1000, 1012))


@dataclass
class Writes:
    lake: skiplake.Lake
    jobs: dict
    written_before: list          # "written" rows before delta-spark's writes
    clustered: dict               # what skiplake saw of delta-spark's clustered table before its OPTIMIZE
    ids_before: list              # rt_ours's row ids before delta-spark's INSERT

    def job(self, job_id: str) -> dict:
        job = self.jobs[job_id]
        assert job["ok"], f"delta-spark failed: {job.get('error_class')}: {job.get('error')}\n{job.get('traceback')}"
        return job


def _sql(job_id: str, sql: str) -> dict:
    return {"id": job_id, "op": "sql", "sql": sql}


def _read(job_id: str, path: str, columns) -> dict:
    return {"id": job_id, "op": "read", "path": path, "columns": list(columns), "history": False}


def _build(spark, lake: skiplake.Lake) -> tuple[list, dict]:
    # "written": checkpointInterval=3 makes delta-spark's append (version 3) write a checkpoint.
    w = lake.create_table("written", SCHEMA, partition_by=PARTITION_BY, properties={"delta.checkpointInterval": "3"})
    w.append(frame(spark, range(0, 20)))
    w.append(frame(spark, range(20, 40)))
    ws = lake.create_table("wser", SCHEMA, partition_by=PARTITION_BY,
                           properties={"delta.isolationLevel": "WriteSerializable"})
    ws.append(frame(spark, range(0, 10)))
    lake.create_table("wser_alter", SCHEMA, partition_by=PARTITION_BY).append(frame(spark, range(0, 5)))
    build_change_feed_tables(spark, lake)
    build_constraint_tables(spark, lake)
    build_clustered_table(spark, lake)
    build_row_tracking_table(spark, lake)
    # delta-spark's clustered table: skiplake keeps its cube, clusters the newer rows, appends and
    # changes the keys, before delta-spark OPTIMIZEs it again.
    shutil.copytree(GOLDEN_DIR / "cl_spark" / "table", Path(lake.root) / "cl_spark")
    cl = lake.table("cl_spark")
    cl.optimize(target_file_size=2048, min_cube_size=1)
    cl.append(cl_rows(spark, 350, 380))
    cl.cluster_by(["k", "id"])
    clustered = {"rows": rows_as_strings(cl.read(), list(CL_COLUMNS))}
    return rows_as_strings(w.read(), COLUMNS), clustered


def _jobs(lake: skiplake.Lake) -> list[dict]:
    def q(name: str) -> str:
        return quote_path(lake.path_of(name))
    written, wser = lake.path_of("written"), lake.path_of("wser")
    jobs = [
        {"id": "written:append", "op": "append", "path": written, "sql": select_sql(WRITTEN_IDS)},
        _read("written@append", written, COLUMNS),
        _sql("written:delete", f"DELETE FROM {q('written')} WHERE {DELETE_WHERE_DS}"),
        _read("written@delete", written, COLUMNS),
        {"id": "wser:append", "op": "append", "path": wser, "sql": select_sql(range(500, 505))},
        _read("wser:read_after", wser, COLUMNS),
        _sql("wser_alter:set", f"ALTER TABLE {q('wser_alter')} SET TBLPROPERTIES "
                               "('delta.isolationLevel' = 'WriteSerializable')"),
    ]
    for name in (CDF_OURS, CDF_OURS_DV):
        jobs += [
            _sql(f"{name}:dml:0", f"DELETE FROM {q(name)} WHERE id % 5 = 1"),
            _sql(f"{name}:dml:1", f"UPDATE {q(name)} SET qty = qty + 1000 WHERE id % 5 = 2"),
            _sql(f"{name}:dml:2", f"MERGE INTO {q(name)} t USING (SELECT id, 'p9' AS part, 7 AS qty "
                                  "FROM range(1005, 1020)) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET * "
                                  "WHEN NOT MATCHED THEN INSERT *"),
            _sql(f"{name}:changes_after", changes_sql(lake.path_of(name))),
            _read(f"{name}:read", lake.path_of(name), ["id", "part", "qty"]),
        ]
    jobs += [
        _sql("ck_ours:bad", f"INSERT INTO {q(CK_OURS)} VALUES (100, -1, 'bad')"),
        _sql("ck_ours:null", f"INSERT INTO {q(CK_OURS)} VALUES (NULL, 1, 'null id')"),
        _sql("ck_ours:good", f"INSERT INTO {q(CK_OURS)} VALUES (101, 1, 'good')"),
        _sql("gen_ours:insert", f"INSERT INTO {q(GEN_OURS)} (id, ts) VALUES (7, TIMESTAMP'2024-06-02 01:00:00')"),
        _sql("gen_ours:bad", f"INSERT INTO {q(GEN_OURS)} VALUES (8, TIMESTAMP'2024-06-02 01:00:00', DATE'1999-01-01')"),
        _sql("id_ours:insert", f"INSERT INTO {q(ID_OURS)} (name) VALUES ('theirs1'), ('theirs2')"),
        _sql("cl_ours:insert", f"INSERT INTO {q(CL_OURS)} VALUES {cl_values(400, 410)}"),
        _sql("cl_ours:optimize", f"OPTIMIZE {q(CL_OURS)}"),
        {"id": "cl_spark:optimize", "op": "sql_read", "sql": f"OPTIMIZE {q('cl_spark')}",
         "path": lake.path_of("cl_spark")},
        {"id": "cl_spark:detail", "op": "detail", "path": lake.path_of("cl_spark")},
        _sql("rt_ours:insert", f"INSERT INTO {q(RT_OURS)} VALUES (100, 1)"),
        _sql("rt_ours:ids", ROW_IDS_SQL.replace("{t}", q(RT_OURS))),
    ]
    return jobs


@pytest.fixture(scope="module")
def writes(spark, delta_spark: DeltaSpark, tmp_path_factory) -> Writes:
    lake = skiplake.Lake(spark, str(tmp_path_factory.mktemp("delta_spark_writes") / "warehouse"))
    written_before, clustered = _build(spark, lake)
    ids_before = ids_of(lake.table(RT_OURS))
    delta_spark.check()
    result = delta_spark.run_batch(_jobs(lake))
    return Writes(lake, result["jobs"], written_before, clustered, ids_before)


def test_skiplake_reads_what_delta_spark_wrote(writes: Writes, spark) -> None:
    appended, deleted = writes.job("written:append"), writes.job("written:delete")
    assert appended["version"] == 3 and deleted["ok"]
    t = writes.lake.table("written")
    assert t.version == 4
    # delta-spark wrote a checkpoint at 3 (delta.checkpointInterval=3); skiplake loads through it.
    assert (Path(t.path) / "_delta_log" / f"{3:020d}.checkpoint.parquet").exists()
    after_append = sort_rows(writes.written_before + rows_as_strings(frame(spark, WRITTEN_IDS), COLUMNS))
    assert [tuple(r) for r in writes.job("written@append")["rows"]] == after_append   # delta-spark's own read
    assert rows_as_strings(t.read(version=3), COLUMNS) == after_append
    # After delta-spark's DELETE: none of the rows it matched, and the rows delta-spark reads.
    ours = rows_as_strings(t.read(), COLUMNS)
    assert ours == [tuple(r) for r in writes.job("written@delete")["rows"]]
    assert t.read(where=DELETE_WHERE_DS).count() == 0
    kept = t.read(version=3).filter(f"NOT coalesce(({DELETE_WHERE_DS}), false)")
    assert ours == rows_as_strings(kept, COLUMNS) and len(ours) < len(after_append)
    # Pruned reads over delta-spark's files: its stats truncate timestamps to milliseconds, so a
    # row whose timestamp has microseconds lies above its file's maxValues.ts.
    survivors = [r for r in ours if int(r[0]) >= 1000 and r[6] is not None and len(r[6]) == 26
                 and not r[6].endswith("000")]
    assert survivors, "no row written by delta-spark with sub-millisecond digits survived the DELETE"
    for r in survivors[:3]:
        rid, day, ts = r[0], r[5], r[6]
        assert t.read(where=f"ts = TIMESTAMP'{ts}'").filter(f"id = {rid}").count() == 1, rid
        assert t.read(where=f"ts >= TIMESTAMP'{ts}' AND d = DATE'{day}'").filter(f"id = {rid}").count() == 1


def test_delta_spark_appends_at_skiplakes_write_serializable_level(writes: Writes) -> None:
    # OBSERVED (delta-spark 4.4.0 on Spark 4.1.4): delta-spark accepts such a table for a blind
    # append, and runs it at that level (commitInfo.isolationLevel = "WriteSerializable"). It
    # validates the property only when it is SET through delta-spark: ALTER TABLE ... SET
    # TBLPROPERTIES ('delta.isolationLevel' = 'WriteSerializable') fails with "requirement failed:
    # delta.isolationLevel must be Serializable". If a later delta-spark refuses the value, this fails.
    t = writes.lake.table("wser")
    assert writes.job("wser:append")["version"] == 2 and t.version == 2
    after = writes.job("wser:read_after")
    assert after["version"] == 2 and [tuple(r) for r in after["rows"]] == rows_as_strings(t.read(), COLUMNS)
    assert t.read().count() == 15 and t.read(version=1).count() == 10
    commit = [json.loads(line) for line in (Path(t.path) / "_delta_log" / f"{2:020d}.json").read_text().splitlines()]
    info = next(a["commitInfo"] for a in commit if "commitInfo" in a)
    assert info["isolationLevel"] == "WriteSerializable" and "Delta-Lake/" in info["engineInfo"]
    assert t.properties["delta.isolationLevel"] == "WriteSerializable"
    assert t.history()[0]["operation"] == "WRITE"
    alter = writes.jobs["wser_alter:set"]
    assert not alter["ok"] and "delta.isolationLevel must be Serializable" in alter["error"], alter
    wa = writes.lake.table("wser_alter")
    assert wa.version == 1 and "delta.isolationLevel" not in wa.properties


@pytest.mark.parametrize("name", [CDF_OURS, CDF_OURS_DV])
def test_skiplake_reads_the_change_feed_after_delta_sparks_dml(writes: Writes, name: str) -> None:
    """skiplake reads the whole feed (delta-spark's change files and deletion vectors too) as
    delta-spark does, after delta-spark's DELETE, UPDATE and MERGE on skiplake's table."""
    for i in range(3):
        writes.job(f"{name}:dml:{i}")
    t = writes.lake.table(name)
    theirs = sort_rows(writes.job(f"{name}:changes_after")["rows"])
    assert theirs == changes_as_strings(t.changes(0))
    assert [tuple(r) for r in writes.job(f"{name}:read")["rows"]] == rows_as_strings(t.read(), ["id", "part", "qty"])
    assert {r[4] for r in theirs} >= {str(t.version)}


def test_delta_spark_keeps_skiplakes_constraints(writes: Writes) -> None:
    for bad in ("ck_ours:bad", "ck_ours:null"):
        job = writes.jobs[bad]
        assert not job["ok"] and ("qty_pos" in job["error"] or "NOT NULL" in job["error"].upper()), job
    writes.job("ck_ours:good")
    ids = sorted(r.id for r in writes.lake.table(CK_OURS).read().collect())
    assert ids == list(range(10)) + [101]


def test_delta_spark_computes_skiplakes_generated_column_and_continues_its_identity(writes: Writes) -> None:
    writes.job("gen_ours:insert")
    assert not writes.jobs["gen_ours:bad"]["ok"]
    rows = {r.id: str(r.d) for r in writes.lake.table(GEN_OURS).read().collect()}
    assert rows[7] == "2024-06-02" and rows[0] == "2024-05-01" and 8 not in rows
    writes.job("id_ours:insert")
    rows = [(r.id, r.name) for r in writes.lake.table(ID_OURS).read().collect()]
    ours = [i for i, n in rows if n.startswith("ours")]
    theirs = [i for i, n in rows if n.startswith("theirs")]
    assert len(set(ours + theirs)) == 6 and min(theirs) > max(ours)


def test_delta_spark_optimizes_skiplakes_clustered_table(writes: Writes) -> None:
    """delta-spark appends to skiplake's clustered table, and its OPTIMIZE reads skiplake's
    clustering domain and cube tags: it clusters by skiplake's keys, and the rows stay the same."""
    writes.job("cl_ours:insert")
    writes.job("cl_ours:optimize")
    t = writes.lake.table(CL_OURS)
    last = t.history(1)[0]
    assert last["operation"] == "OPTIMIZE" and json.loads(last["operationParameters"]["clusterBy"]) == ["k", "id"]
    assert all(f.clusteringProvider == "liquid" and json.loads((f.tags or {})["ZCUBE_ZORDER_BY"]) == ["k", "id"]
               for f in t.snapshot.add_files)
    assert sorted(r.id for r in t.read().collect()) == list(range(410))


def test_delta_spark_optimizes_the_table_skiplake_clustered(writes: Writes) -> None:
    """After skiplake clustered delta-spark's table and changed its keys, delta-spark's OPTIMIZE
    clusters by the new keys and keeps the rows."""
    job = writes.job("cl_spark:optimize")
    assert sorted(tuple(r) for r in job["read"]["rows"]) == sorted(writes.clustered["rows"])
    assert len(writes.clustered["rows"]) == 380
    assert writes.job("cl_spark:detail")["detail"]["clusteringColumns"] == ["k", "id"]
    assert writes.lake.table("cl_spark").history(1)[0]["operation"] == "OPTIMIZE"


def test_delta_spark_assigns_row_ids_past_skiplakes(writes: Writes) -> None:
    writes.job("rt_ours:insert")
    after = ids_of(writes.lake.table(RT_OURS))
    assert [r for r in after if r[0] != "100"] == writes.ids_before
    [new] = [r for r in after if r[0] == "100"]
    assert int(new[1]) > max(int(r[1]) for r in writes.ids_before)
    assert sorted(tuple(r) for r in writes.job("rt_ours:ids")["rows"]) == after
