"""TPC-DS answers: every query through lake.sql (dynamic file pruning on), checked against DuckDB.

DuckDB's tpcds extension generates the data and holds the 99 queries; the lake is built from the
very same generated files (testing_support.tpcds_lake: fact tables Z-ordered by date and item key), so
DuckDB's answer over the generated Parquet is the expected answer. Queries are DuckDB's text
transpiled to Spark SQL by sqlglot. Answers are compared as sorted rows, numbers rounded to two
decimals (DuckDB and Spark sum doubles in different orders).

    .venv/bin/python -m testing_support.tpcds_answers [--sf 1] [--files 64] [--queries 3,5,42] [--json]

Prints a line per query (same answer or not, fact files read, dynamic pruning applied) and exits
non-zero when an answer differs or a query fails.
"""
from __future__ import annotations

import argparse
import datetime as dt
import decimal
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from testing_support.paths import DEFAULT_BASE

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    import skiplake

FACTS = ("store_sales", "catalog_sales", "web_sales", "store_returns", "catalog_returns", "web_returns", "inventory")


@dataclass
class Answer:
    query: int
    same: bool
    rows: int
    seconds: float
    error: str = ""
    applied: list[str] = field(default_factory=list)        # join types dynamic pruning applied to
    # ... and those it would apply to but for its cost model (before or after the build)
    candidates: list[str] = field(default_factory=list)
    fact_files: dict[str, list[int]] = field(default_factory=dict)  # fact table -> [files read, files]


def spark_queries(numbers: Sequence[int] | None = None) -> dict[int, str]:
    """The TPC-DS queries in Spark SQL (DuckDB's text through sqlglot)."""
    import sqlglot

    from skiplake.tpcds import queries
    qs = queries()
    return {n: sqlglot.transpile(qs[n], read="duckdb", write="spark")[0] for n in (numbers or sorted(qs))}


def duckdb_answers(raw: Path, numbers: Sequence[int]) -> dict[int, list[tuple]]:
    """DuckDB's answers over the generated Parquet files."""
    import duckdb

    from skiplake.tpcds import TPCDS_TABLES, queries
    qs = queries()
    con = duckdb.connect()
    for t in TPCDS_TABLES:
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{raw / (t + '.parquet')}')")
    return {n: con.execute(qs[n]).fetchall() for n in numbers}


def canonical(rows: Sequence[Sequence[Any]]) -> list[tuple]:
    def norm(v: Any) -> Any:
        if isinstance(v, (float, decimal.Decimal)):
            f = float(v)
            return round(f, 2) if abs(f) < 1e12 else float(f"{f:.10g}")
        if isinstance(v, (dt.date, dt.datetime)):
            return v.isoformat()
        return v
    out = [tuple(norm(v) for v in r) for r in rows]
    return sorted(out, key=lambda r: tuple((x is None, type(x).__name__, x if x is not None else 0) for x in r))


def check(spark: "SparkSession", lake: "skiplake.Lake", raw: Path, numbers: Sequence[int],
          progress: Any = None) -> list[Answer]:
    """Run each query through lake.sql and compare with DuckDB's answer."""
    texts = spark_queries(numbers)
    expected = duckdb_answers(raw, numbers)
    out = []
    for n in numbers:
        started = time.perf_counter()
        try:
            rows = lake.sql(texts[n]).collect()
        except Exception as e:  # reported per query; the run goes on
            out.append(Answer(n, False, 0, time.perf_counter() - started, error=f"{type(e).__name__}: {e}"[:300]))
            continue
        seconds = time.perf_counter() - started
        explained = lake.last_explain
        answer = Answer(n, canonical(rows) == canonical(expected[n]), len(rows), round(seconds, 3))
        if explained is not None:
            answer.applied = sorted({d.join_type for d in explained.dynamic if d.applied})
            answer.candidates = sorted({d.join_type for d in explained.dynamic
                                        if d.applied or d.reason.startswith("by cost")})
            for r in explained:
                name = r.table.rstrip("/").rsplit("/", 1)[-1]
                if name in FACTS:
                    read, total = answer.fact_files.get(name, [0, 0])
                    answer.fact_files[name] = [read + r.files_selected, total + r.files_total]
        out.append(answer)
        if progress:
            progress(_line(answer))
    return out


def _line(a: Answer) -> str:
    files = ", ".join(f"{t} {r}/{n}" for t, (r, n) in a.fact_files.items())
    status = "same" if a.same else ("ERROR " + a.error if a.error else "DIFFERENT")
    return f"q{a.query:02d} {status:9s} {a.rows:5d} rows {a.seconds:7.2f}s  dfp {','.join(a.applied) or '-':24s} {files}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1.0, help="TPC-DS scale factor (default 1)")
    parser.add_argument("--files", type=int, default=64, help="files of store_sales (default 64)")
    parser.add_argument("--queries", default=None, help="comma-separated query numbers (default all 99)")
    parser.add_argument("--data", default=str(DEFAULT_BASE), help="where generated data and the lake go")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    from testing_support.paths import setup_java
    setup_java()
    import skiplake
    from testing_support.tpcds_lake import build_lake, raw_root
    say = (lambda m: print(m, file=sys.stderr, flush=True)) if args.json else (lambda m: print(m, flush=True))
    spark = skiplake.local_spark(app_name="tpcds-answers", shuffle_partitions=8)
    base = Path(args.data)
    root = build_lake(spark, base, args.sf, args.files, progress=say)
    numbers = [int(x) for x in args.queries.split(",")] if args.queries else list(range(1, 100))
    answers = check(spark, skiplake.Lake(spark, str(root)), raw_root(base, args.sf), numbers, progress=say)
    bad = [a.query for a in answers if not a.same]
    say(f"{len(answers) - len(bad)} of {len(answers)} answers equal DuckDB's at sf={args.sf:g}; different: {bad or 'none'}")
    if args.json:
        print(json.dumps({"sf": args.sf, "files": args.files, "answers": [asdict(a) for a in answers],
                          "different": bad}, indent=2))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
