"""The `skiplake` command line, run in-process through skiplake.cli.main, and the demo at a tiny scale."""
from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys

import pytest

from skiplake.cli import main

pytestmark = pytest.mark.spark

REGIONS = ("eu", "us", "apac")
SCHEMA = "id BIGINT, region STRING, amount DOUBLE"


def _rows(start: int, n: int) -> list[tuple]:
    return [(i, REGIONS[i % 3], float(i)) for i in range(start, start + n)]


@pytest.fixture
def sales(lake, spark):
    """A table partitioned by region: v0 create, v1 and v2 appends, v3 delete."""
    t = lake.create_table("sales", SCHEMA, partition_by=["region"],
                          properties={"delta.isolationLevel": "Serializable"})
    t.append(spark.createDataFrame(_rows(0, 30), SCHEMA).coalesce(1))  # one file per region
    t.append(spark.createDataFrame(_rows(100, 30), SCHEMA).coalesce(1))
    t.delete("id < 5")
    return t


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv: str) -> dict:
    code, out, err = run_cli(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)  # the whole of stdout is one JSON document


# ---------------------------------------------------------------- describe


def test_describe_json(sales, capsys):
    doc = run_json(capsys, "describe", sales.path)
    snap = sales.refresh().snapshot
    assert doc["path"] == sales.path
    assert doc["name"] == "sales"
    assert doc["version"] == 3 == snap.version
    assert [(c["name"], c["type"]) for c in doc["schema"]] == [("id", "long"), ("region", "string"),
                                                                 ("amount", "double")]
    assert all(c["nullable"] for c in doc["schema"])
    assert doc["partition_columns"] == ["region"]
    assert doc["properties"] == {"delta.isolationLevel": "Serializable"}
    assert doc["isolation_level"] == "Serializable"
    assert doc["num_files"] == len(snap.add_files)
    assert doc["total_bytes"] == sum(f.size for f in snap.add_files)
    assert doc["total_rows"] == 55 == sales.read().count()
    assert doc["protocol"]["minReaderVersion"] == snap.protocol.minReaderVersion
    assert doc["protocol"]["minWriterVersion"] == snap.protocol.minWriterVersion
    last = dt.datetime.fromisoformat(doc["last_commit_time"])
    assert abs((dt.datetime.now(dt.timezone.utc) - last).total_seconds()) < 600


def test_describe_human(sales, capsys):
    code, out, err = run_cli(capsys, "describe", sales.path)
    assert code == 0, err
    for word in ("sales", "id", "region", "amount", "Serializable", "long", "delta.isolationLevel"):
        assert word in out
    assert err == ""


def test_describe_default_isolation_and_empty_table(lake, capsys):
    t = lake.create_table("empty", "a INT, b STRING")
    doc = run_json(capsys, "describe", t.path)
    assert doc["version"] == 0
    assert doc["isolation_level"] == "WriteSerializable"
    assert (doc["num_files"], doc["total_bytes"], doc["total_rows"]) == (0, 0, 0)
    assert doc["partition_columns"] == []


# ---------------------------------------------------------------- history


def test_history_json(sales, capsys):
    doc = run_json(capsys, "history", sales.path)
    entries = doc["history"]
    assert [e["version"] for e in entries] == [3, 2, 1, 0]
    assert [e["operation"] for e in entries] == ["DELETE", "WRITE", "WRITE", "CREATE TABLE"]
    delete, second, first, create = entries
    assert first["isBlindAppend"] is True and second["isBlindAppend"] is True
    assert delete["isBlindAppend"] is False
    assert first["parameters"]["mode"] == "Append"
    assert first["parameters"]["partitionBy"] == ["region"]  # JSON-encoded in the log, decoded here
    assert delete["parameters"]["predicate"] == ["id < 5"]
    assert first["rows_written"] == 30 and first["files_added"] == 3
    assert delete["rows_deleted"] == 5
    assert delete["files_removed"] == 3 and delete["files_added"] == 3  # ids 0..4 are in every region
    assert delete["isolationLevel"] == "Serializable"
    stamps = [dt.datetime.fromisoformat(e["timestamp"]) for e in entries]
    assert stamps == sorted(stamps, reverse=True)
    # the CLI agrees with the Table API
    assert [e["version"] for e in sales.history()] == [3, 2, 1, 0]


def test_history_limit_and_human(sales, capsys):
    doc = run_json(capsys, "history", sales.path, "--limit", "2")
    assert [e["version"] for e in doc["history"]] == [3, 2]
    code, out, err = run_cli(capsys, "history", sales.path)
    assert code == 0, err
    for word in ("DELETE", "WRITE", "CREATE TABLE", "sales", "id < 5"):
        assert word in out
    code, out, err = run_cli(capsys, "history", sales.path, "--limit", "0")
    assert code == 2 and "--limit" in err and out == ""


# ---------------------------------------------------------------- explain


def test_explain_partition_predicate(sales, capsys):
    doc = run_json(capsys, "explain", sales.path, "--where", "region = 'eu'")
    assert doc["files_total"] == len(sales.refresh().snapshot.add_files)
    assert 0 < doc["files_selected"] < doc["files_total"]
    assert doc["files_skipped"] == doc["files_total"] - doc["files_selected"]
    assert (doc["partitions_selected"], doc["partitions_total"]) == (1, 3)
    assert doc["bytes_selected"] < doc["bytes_total"]
    assert doc["predicate"] == "region = 'eu'"
    assert doc["version"] == 3
    assert "SelectedFilesCount" in doc["text"]


def test_explain_stats_predicate_and_time_travel(sales, capsys):
    # ids of version 2 run to 129: min/max stats prove no file holds id >= 1000
    doc = run_json(capsys, "explain", sales.path, "--where", "id >= 1000")
    assert doc["files_selected"] == 0 and doc["files_total"] > 0
    # the second append's files (ids 100..129) are skipped for a small id
    doc = run_json(capsys, "explain", sales.path, "--where", "id = 7")
    assert doc["files_selected"] < doc["files_total"]
    assert doc["partition_filters"] == [] and any("id" in f for f in doc["data_filters"])
    # at version 1 only the first append existed
    doc = run_json(capsys, "explain", sales.path, "--where", "id = 7", "--version", "1")
    assert doc["version"] == 1 and doc["files_total"] == 3


def test_explain_human(sales, capsys):
    code, out, err = run_cli(capsys, "explain", sales.path, "--where", "region = 'eu' AND id > 20")
    assert code == 0, err
    assert "SelectedFilesCount" in out and "SelectedPartitionsCount: 1 out of 3" in out
    assert "sales" in out


def test_explain_bad_predicate_exits_2(sales, capsys):
    code, out, err = run_cli(capsys, "explain", sales.path, "--where", "no_such_column = 1")
    assert code == 2
    assert out == ""
    assert err.startswith("skiplake explain: error:") and err.count("\n") == 1
    assert "Traceback" not in err


# ---------------------------------------------------------------- vacuum and optimize


def test_vacuum(sales, spark, capsys):
    removed = run_json(capsys, "history", sales.path, "--limit", "1")["history"][0]["files_removed"]
    doc = run_json(capsys, "vacuum", sales.path, "--dry-run")
    assert doc["dry_run"] is True and doc["files_deleted"] == 0  # removed files are younger than 7 days

    code, out, err = run_cli(capsys, "vacuum", sales.path, "--retention-hours", "0", "--dry-run")
    assert code == 2 and out == "" and "retention" in err and err.count("\n") == 1

    doc = run_json(capsys, "vacuum", sales.path, "--retention-hours", "0", "--dry-run", "--force")
    assert doc["dry_run"] is True and doc["files_deleted"] == removed > 0
    assert all(os.path.exists(os.path.join(sales.path, f)) for f in doc["files"])
    assert doc["bytes_deleted"] == sum(os.path.getsize(os.path.join(sales.path, f)) for f in doc["files"])

    doc = run_json(capsys, "vacuum", sales.path, "--retention-hours", "0", "--force")
    assert doc["dry_run"] is False and doc["files_deleted"] == removed
    assert not any(os.path.exists(os.path.join(sales.path, f)) for f in doc["files"])
    assert sales.refresh().read().count() == 55  # only unreferenced files went

    code, out, err = run_cli(capsys, "vacuum", sales.path, "--retention-hours", "0", "--force")
    assert code == 0 and "deleted 0 files" in out


def test_optimize(lake, spark, capsys):
    t = lake.create_table("small", "id BIGINT, part STRING", partition_by=["part"])
    for start in (0, 10, 20):
        t.append(spark.createDataFrame([(i, "a" if i % 2 else "b") for i in range(start, start + 10)],
                                       "id BIGINT, part STRING").coalesce(1))
    files_before = len(t.refresh().snapshot.add_files)
    doc = run_json(capsys, "optimize", t.path, "--where", "part = 'a'")
    assert doc["files_before"] == files_before == 6
    assert doc["files_removed"] == 3 and doc["files_added"] == 1 and doc["partitions_optimized"] == 1
    assert doc["files_after"] == 4
    assert doc["version"] == 4
    code, out, err = run_cli(capsys, "optimize", t.path)
    assert code == 0, err
    assert "OPTIMIZE" in out and "version 5" in out
    assert t.refresh().read().count() == 30
    assert run_json(capsys, "history", t.path, "--limit", "1")["history"][0]["operation"] == "OPTIMIZE"
    # nothing left to compact
    doc = run_json(capsys, "optimize", t.path)
    assert doc["version"] is None and doc["files_removed"] == 0
    # optimize may only filter on partition columns
    code, out, err = run_cli(capsys, "optimize", t.path, "--where", "id > 3")
    assert code == 2 and "partition" in err


# ---------------------------------------------------------------- restore


def test_restore(sales, capsys):
    doc = run_json(capsys, "restore", sales.path, "--to-version", "1")
    assert (doc["version"], doc["restored_version"]) == (4, 1)
    assert doc["num_of_files_after_restore"] == len(sales.refresh().snapshot.add_files) == 3
    assert sales.read().count() == 30
    code, out, err = run_cli(capsys, "restore", sales.path, "--to-version", "2")
    assert code == 0 and "RESTORE" in out and "version 2" in out and sales.refresh().read().count() == 60
    code, out, err = run_cli(capsys, "restore", sales.path, "--to-version", "9")
    assert code == 2 and "older than the latest" in err
    detail = run_json(capsys, "describe", sales.path)["detail"]
    assert detail["numFiles"] == 6 and detail["format"] == "delta" and detail["partitionColumns"] == ["region"]


# ---------------------------------------------------------------- errors and plumbing


@pytest.mark.parametrize("command", [["describe"], ["history"], ["explain", "--where", "a = 1"],
                                     ["vacuum", "--dry-run"], ["optimize"], ["restore", "--to-version", "0"]])
def test_not_a_table_exits_2(tmp_path, capsys, command):
    missing = str(tmp_path / "nowhere")
    code, out, err = run_cli(capsys, command[0], missing, *command[1:])
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and "is not a skiplake/Delta table" in err and missing in err
    assert "Traceback" not in err


def test_usage_errors(capsys):
    assert main([]) == 2
    assert main(["explain", "/tmp"]) == 2  # --where is required
    assert main(["--version"]) == 0
    out, err = capsys.readouterr()
    assert "skiplake 0.1.0" in out


def test_read_only_commands_do_not_start_spark(sales):
    """describe/history/explain/vacuum/restore read the log: pyspark is never imported (they run in a second)."""
    code = (
        "import sys, json\n"
        "from skiplake.cli import main\n"
        "p = sys.argv[1]\n"
        "for argv in (['describe', p], ['history', p], ['explain', p, '--where', 'id = 7'],\n"
        "             ['vacuum', p, '--dry-run'], ['describe', p, '--json'], ['restore', p, '--to-version', '1']):\n"
        "    assert main(argv) == 0, argv\n"
        "assert 'pyspark' not in sys.modules, 'pyspark was imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, sales.path], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------- demo


@pytest.mark.slow
def test_demo_tiny(spark, tmp_path, capsys):
    pytest.importorskip("duckdb")
    pytest.importorskip("duckdb_extension_tpcds")
    from skiplake import demo
    summary = demo.run(sf=0.01, warehouse=str(tmp_path / "wh"), data_dir=str(tmp_path / "data"), as_json=True,
                       spark=spark)
    out, err = capsys.readouterr()
    doc = json.loads(out)  # --json: stdout is exactly one document
    assert doc["tables"] == summary["tables"]
    assert "[1/8]" in err and "[8/8]" in err  # progress went to stderr
    assert [s["stage"] for s in summary["stages"]] == [1, 2, 3, 4, 5, 6, 7, 8]

    d = summary["dynamic_pruning"]  # the seed's Q2: item's keys prune store_sales at run time
    assert d["same_answer"] and d["dynamic_filters"]
    # At sf=0.01 the layout puts Q2's keys near half the rows, and where Spark cuts the files
    # moves that a little (0.49 seen once, above 0.5 otherwise): a clear share, not a fixed line.
    assert d["files_selected"] < d["files_total"] and d["rows_skipped"] > 0.4
    # At this size pruning saves milliseconds: the cost model declines the build, and says why.
    assert d["cost_model"].startswith("by cost") and "probe" in d["cost_model"], d["cost_model"]
    from skiplake.spark.pruning.pruning_settings import COST_MODEL, FILES_THRESHOLD, SIZE_THRESHOLD
    assert spark.conf.get(SIZE_THRESHOLD, None) is None and spark.conf.get(FILES_THRESHOLD, None) is None
    assert spark.conf.get(COST_MODEL, None) is None

    generated = summary["generated"]["rows"]
    tables = summary["tables"]
    b = summary["bucketing"]
    assert b["join"]["bucketed"] and b["join"]["same_as_unbucketed"] and b["join"]["rows"]
    assert b["store_sales_by_item"]["rows"] == generated["store_sales"]
    assert b["q1_scan"]["buckets_selected"] <= 3 < b["q1_scan"]["buckets_total"] == 16
    for name in demo.TABLES:
        assert summary["loaded"][name]["rows"] == generated[name] > 0
        assert tables[name]["rows_loaded"] == generated[name]
    assert tables["item"]["rows"] == generated["item"] and tables["date_dim"]["rows"] == generated["date_dim"]

    m = summary["maintenance"]
    deleted = m["delete"]["rows_deleted"]
    assert deleted > 0
    assert tables["store_sales"]["rows"] == generated["store_sales"] - deleted
    assert m["time_travel"]["rows_then"] == generated["store_sales"]
    assert m["time_travel"]["rows_now"] == generated["store_sales"] - deleted
    assert m["update"]["rows_matched"] > 0
    import skiplake
    ss = skiplake.Table.open(spark, tables["store_sales"]["path"])
    assert ss.read("ss_item_sk = 41").count() == m["update"]["rows_matched"]
    with_quantity = ss.read("ss_item_sk = 41 AND ss_quantity IS NOT NULL").count()  # NULL + 1 stays NULL
    assert m["update"]["q1_after"] == m["update"]["q1_before"] + with_quantity
    assert ss.read("ss_item_sk = 42").count() == 0
    assert m["optimize"]["rows_after"] == tables["store_sales"]["rows"]
    assert m["optimize"]["files_after"] == tables["store_sales"]["files"]
    assert m["optimize"]["zorder_by"] == ["ss_item_sk"]
    assert m["optimize"]["q1_files_selected"] <= m["optimize"]["q1_files_total"] == m["optimize"]["files_after"]
    assert [e["operation"] for e in m["history"]] == ["OPTIMIZE", "UPDATE", "DELETE", "WRITE", "CREATE TABLE"]
    assert tables["store_sales"]["version"] == 4

    queries = {q["name"]: q for q in summary["queries"]}
    assert queries["q1"]["result"] == queries["q2"]["result"]  # seed Q1 and Q2 agree
    assert queries["q1"]["result"][0]["total_quantity"] == m["time_travel"]["q1_then"]
    assert 0 < queries["star_join"]["rows"] <= 10
    scan = summary["q1_scan"]
    assert scan["files_selected"] < scan["files_total"] == summary["loaded"]["store_sales"]["files"]

    # the human summary renders from the same dict
    import io

    from rich.console import Console
    buf = io.StringIO()
    demo._print_summary(Console(file=buf, width=130), summary)
    text = buf.getvalue()
    for word in ("store_sales", "date_dim", "point query: file skipping", "star join: dynamic pruning", "OPTIMIZE", "total",
                 f"{generated['item']:,}"):
        assert word in text

    # run again into the same warehouse: the tables are recreated and the data reused
    again = demo.run(sf=0.01, warehouse=str(tmp_path / "wh"), data_dir=str(tmp_path / "data"), as_json=True,
                     spark=spark)
    capsys.readouterr()
    assert again["tables"]["store_sales"]["rows"] == tables["store_sales"]["rows"]
    assert again["tables"]["store_sales"]["version"] == 4
    assert spark.range(3).count() == 3  # the shared session is still alive


def test_demo_refuses_to_delete_a_foreign_folder(spark, tmp_path, capsys):
    pytest.importorskip("duckdb")
    pytest.importorskip("duckdb_extension_tpcds")
    wh = tmp_path / "wh"
    (wh / "store_sales").mkdir(parents=True)
    (wh / "store_sales" / "precious.txt").write_text("keep me")
    code = main(["demo", "--sf", "0.01", "--warehouse", str(wh), "--data", str(tmp_path / "data"), "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and "not a skiplake table" in err
    assert (wh / "store_sales" / "precious.txt").read_text() == "keep me"


def test_demo_bad_scale_factor(capsys):
    code = main(["demo", "--sf", "-1"])
    out, err = capsys.readouterr()
    assert code == 2 and "scale factor" in err and out == ""


@pytest.mark.spark
def test_sql_runs_a_script_and_prints_results(spark, tmp_path, capsys):
    root = str(tmp_path / "lake")
    script = tmp_path / "etl.sql"
    script.write_text("CREATE TABLE t (id INT, v STRING);\nINSERT INTO t VALUES (1, 'a'), (2, 'b');\n"
                      "-- a comment; with a semicolon\nUPDATE t SET v = 'z' WHERE id = 2;\nSELECT * FROM t ORDER BY id")
    assert main(["sql", "--root", root, "-f", str(script), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["columns"] for r in out] == [[], [], ["num_affected_rows"], ["id", "v"]]
    assert out[2]["rows"] == [[1]] and out[3]["rows"] == [[1, "a"], [2, "z"]]
    assert main(["sql", "--root", root, "-e", "DESCRIBE HISTORY t LIMIT 1"]) == 0
    assert "UPDATE" in capsys.readouterr().out
