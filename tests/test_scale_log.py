"""A table of a million files, from a synthetic log whose data files are absent (but one): only
what the log alone can answer runs, and a query that prunes to one file reads just that file.

The log is benchmark 29's (benchmarks.scale_logs): file i holds ss_ticket_number i*1000 to
i*1000+999 on day FIRST_DATE + i % NUM_DATES. Both kinds of checkpoint are tried: JSON stats
only, and JSON plus typed stats (add.stats_parsed).
"""
from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import skiplake
from benchmarks.scale_logs import ROWS_PER_FILE, write_log
from benchmarks.synthetic import FIRST_DATE, NUM_DATES
from skiplake.log.actions import AddFile
from skiplake.log.checkpoint import write_checkpoint
from skiplake.log.snapshot import Snapshot, log_storage
from skiplake.skipping.plan import plan_scan
from skiplake.txn.commit import commit
from skiplake.txn.read_set import ReadSet

pytestmark = [pytest.mark.slow, pytest.mark.spark]

FILES = 1_000_000
TOTAL = FILES + 10 * 100   # the checkpoint's files and ten commits of 100


@pytest.fixture(scope="module", params=["json", "typed"])
def root(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp(f"million-{request.param}")
    write_log(base / "sales", FILES, typed=request.param == "typed")
    return str(base)


def _day(i: int) -> dt.date:
    return FIRST_DATE + dt.timedelta(days=i % NUM_DATES)


def test_the_log_plans_answers_and_commits(root: str, tmp_path: Path) -> None:
    # On a copy of the log: the other test counts the table as written.
    path = str(tmp_path / "sales")
    shutil.copytree(os.path.join(root, "sales", "_delta_log"), os.path.join(path, "_delta_log"))
    snapshot = Snapshot.load(path)
    assert snapshot.num_files == TOTAL
    assert (snapshot.parsed_stats is not None) == root.rstrip("/").split("/")[-1].startswith("million-typed")
    typed = snapshot.parsed_stats is not None
    # With typed stats the adds' JSON stats stay in the checkpoint until a plan's files need theirs.
    assert (snapshot.deferred_stats is not None) == typed
    i = 654_321
    plan = plan_scan(snapshot, f"ss_ticket_number = {i * ROWS_PER_FILE + 7}")
    assert plan.selected.column("path").to_pylist() == [f"ss_sold_date={_day(i)}/part-{i}-c000.snappy.parquet"]
    [chosen] = plan.files
    assert chosen.stats is not None and f'"ss_ticket_number":{i * ROWS_PER_FILE}' in chosen.stats
    assert "files" not in snapshot.__dict__   # only that file's stats were read back
    add = AddFile(f"ss_sold_date={_day(0)}/part-new.snappy.parquet", {"ss_sold_date": str(_day(0))}, 1000,
                  1_700_000_000_000, True,
                  '{"numRecords":3,"minValues":{"ss_ticket_number":-3},"maxValues":{"ss_ticket_number":-1},'
                  '"nullCount":{"ss_ticket_number":0}}')
    done = commit(snapshot, [add], "WRITE", {"mode": "Append"}, ReadSet(), {})
    after = Snapshot.load(path)
    assert after.version == done.version == snapshot.version + 1 and after.num_files == TOTAL + 1
    assert write_checkpoint(log_storage(path), after)
    again = Snapshot.load(path)
    assert again.num_files == TOTAL + 1 and again.parsed_stats is not None   # skiplake's checkpoints are typed
    assert plan_scan(again, f"ss_ticket_number = {i * ROWS_PER_FILE + 7}").selected.num_rows == 1


def test_lake_sql_answers_from_the_log_and_reads_only_the_planned_file(spark, root: str) -> None:
    lake = skiplake.Lake(spark, root)
    n = lake.sql("SELECT COUNT(*) AS n FROM sales").collect()[0].n
    assert n == TOTAL * ROWS_PER_FILE
    assert lake.last_explain is not None and lake.last_explain.log_answer is not None
    assert lake.last_explain.log_answer.files_read == 0
    day = _day(17)
    files_of_day = [i for i in range(TOTAL) if _day(i) == day]
    got = lake.sql(f"SELECT COUNT(*) AS n, MIN(ss_ticket_number) AS lo, MAX(ss_ticket_number) AS hi "
                   f"FROM sales WHERE ss_sold_date = DATE'{day}'").collect()[0]
    assert (got.n, got.lo, got.hi) == (len(files_of_day) * ROWS_PER_FILE, files_of_day[0] * ROWS_PER_FILE,
                                       files_of_day[-1] * ROWS_PER_FILE + ROWS_PER_FILE - 1)
    # One data file made real: a query pruned to it reads it, and no other file (all absent) is
    # listed or opened on the way.
    i = 123_456
    lo = i * ROWS_PER_FILE
    rows = pa.table({"ss_ticket_number": pa.array(range(lo, lo + ROWS_PER_FILE), pa.int64()),
                     "ss_item_sk": pa.array([7] * ROWS_PER_FILE, pa.int32()),
                     "ss_sales_price": pa.array([1.5] * ROWS_PER_FILE, pa.float64()),
                     "ss_promo_name": pa.array(["x"] * ROWS_PER_FILE, pa.string())})
    target = Path(root) / "sales" / f"ss_sold_date={_day(i)}" / f"part-{i}-c000.snappy.parquet"
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows, str(target))
    query = f"SELECT SUM(ss_ticket_number - {lo}) AS s, COUNT(*) AS n FROM sales WHERE ss_ticket_number BETWEEN {lo} AND {lo + 9}"
    got = lake.sql(query).collect()[0]
    assert (got.s, got.n) == (45, 10)
    [report] = lake.last_explain
    assert (report.files_selected, report.files_total) == (1, TOTAL)
