"""Benchmark 7: the catalog's GetPartitions at 10k, 100k and 1M partitions, with and without a
partition index, and moto's Glue (PyPI) at 100k as the peer.

A sales table partitioned by country (string, 20 values), category (string, 25),
year (int, 2011-2020), month (int, 1-12), creationDate (date); N partitions drawn without
repeats from those combinations (fixed seed). Two tables of the same partitions: one with the
index (country, category, year), one without. In-process calls (`GlueCatalog.call`), SQLite
file database; GetPartitions follows NextToken to the end (MaxResults 1000).

    .venv/bin/python -m benchmarks.bench_catalog [--quick] [--sizes 10000,100000,1000000] [--json]
"""
from __future__ import annotations

import datetime as dt
import random
import sys
import time
from typing import Any, Callable

from benchmarks.common import Progress, Report, base_parser, command_line, finish, median, workdir

KEYS = [{"Name": "country", "Type": "string"}, {"Name": "category", "Type": "string"},
        {"Name": "year", "Type": "int"}, {"Name": "month", "Type": "int"}, {"Name": "creationDate", "Type": "date"}]
COUNTRIES = [f"C{i:02d}" for i in range(20)]
CATEGORIES = [f"cat{i:02d}" for i in range(25)]
YEARS = list(range(2011, 2021))
QUERIES = {
    "country = 'C07'": "country = 'C07'",
    "country and category": "country = 'C07' AND category = 'cat11'",
    "category only (no index)": "category = 'cat11'",
    "country, category, year > 2018": "country = 'C07' AND category = 'cat11' AND year > '2018'",
    "... and month = 2": "country = 'C07' AND category = 'cat11' AND year > '2018' AND month = 2",
    "AND ... OR (no index)": "country = 'C07' AND category = 'cat11' OR year > '2018'",
    "(year = 2017 OR year = 2018)": "country = 'C07' AND category = 'cat11' AND (year = '2017' OR year = '2018')",
    "country IN (no index)": "country IN ('C07', 'C08') AND category = 'cat11'",
    "category IN": "country = 'C07' AND category IN ('cat11', 'cat12')",
    "category IN, creationDate >": "country = 'C07' AND category IN ('cat11', 'cat12') AND creationDate > '2019-9-01'",
}
SELECTIVE = "country, category, year > 2018"


def partitions(n: int, seed: int = 11) -> list[list[str]]:
    space = len(COUNTRIES) * len(CATEGORIES) * len(YEARS) * 12 * 28
    out = []
    for i in random.Random(seed).sample(range(space), n):
        i, day = divmod(i, 28)
        i, month = divmod(i, 12)
        i, year = divmod(i, len(YEARS))
        country, category = divmod(i, len(CATEGORIES))
        y, m = YEARS[year], month + 1
        out.append([COUNTRIES[country], CATEGORIES[category], str(y), str(m), dt.date(y, m, day + 1).isoformat()])
    return out


def fill(call: Callable[[str, dict], dict], table: str, rows: list[list[str]]) -> float:
    t0 = time.perf_counter()
    for i in range(0, len(rows), 100):
        out = call("BatchCreatePartition", {"DatabaseName": "sales", "TableName": table, "PartitionInputList": [
            {"Values": v, "StorageDescriptor": {"Location": "/data/sales/" + "/".join(v)}} for v in rows[i:i + 100]]})
        if out.get("Errors"):
            raise RuntimeError(out["Errors"][:2])
    return time.perf_counter() - t0


def get_all(call: Callable[[str, dict], dict], table: str, expression: str) -> int:
    n, token = 0, None
    while True:
        params: dict[str, Any] = {"DatabaseName": "sales", "TableName": table, "Expression": expression,
                                  "MaxResults": 1000}
        if token:
            params["NextToken"] = token
        out = call("GetPartitions", params)
        n += len(out["Partitions"])
        token = out.get("NextToken")
        if not token:
            return n


def timed_queries(call: Callable[[str, dict], dict], table: str, reps: int, slow_reps: int,
                  catalog: Any | None = None) -> dict[str, tuple[list[float], int, Any]]:
    out = {}
    for name, expr in QUERIES.items():
        samples, count, plan = [], 0, None
        for r in range(reps):
            t0 = time.perf_counter()
            count = get_all(call, table, expr)
            samples.append(time.perf_counter() - t0)
            plan = dict(catalog.last_plan) if catalog is not None else None
            # Full scans of a million partitions take seconds: fewer repetitions of those.
            if samples[-1] > 0.5 and r + 1 >= slow_reps or samples[-1] > 3.0:
                break
        out[name] = (samples, count, plan)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=None, help="comma-separated partition counts")
    parser.add_argument("--moto-size", type=int, default=None, help="partitions in moto's table (default 100,000)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else ([10_000, 100_000] if args.quick else
                                                                        [10_000, 100_000, 1_000_000])
    moto_size = args.moto_size or (10_000 if args.quick else 100_000)
    reps = args.reps or 9
    progress = Progress("catalog")
    report = Report("bench_catalog", "Catalog GetPartitions with and without a partition index, "
                    f"{', '.join(f'{n:,}' for n in sizes)} partitions",
                    command_line("bench_catalog", args, [f"--sizes {args.sizes}"] if args.sizes else []),
                    {"sizes": sizes, "moto_size": moto_size, "reps": reps, "database": "SQLite file"})
    from skiplake.catalog.service import GlueCatalog
    results: dict[int, dict[str, dict]] = {}
    with workdir("catalog", args.workdir, args.keep, progress) as root:
        for n in sizes:
            catalog = GlueCatalog(f"sqlite:///{root / f'catalog-{n}.db'}")
            catalog.call("CreateDatabase", {"DatabaseInput": {"Name": "sales"}})
            catalog.call("CreateTable", {"DatabaseName": "sales", "TableInput": {"Name": "indexed", "PartitionKeys": KEYS},
                                         "PartitionIndexes": [{"IndexName": "ccy", "Keys": ["country", "category", "year"]}]})
            catalog.call("CreateTable", {"DatabaseName": "sales", "TableInput": {"Name": "plain", "PartitionKeys": KEYS}})
            rows = partitions(n)
            secs = fill(catalog.call, "indexed", rows)
            report.timing(f"{n:,} partitions", "BatchCreatePartition, with index (all batches)", [secs],
                          f"{n / secs:,.0f} partitions/s")
            secs = fill(catalog.call, "plain", rows)
            report.timing(f"{n:,} partitions", "BatchCreatePartition, no index (all batches)", [secs],
                          f"{n / secs:,.0f} partitions/s")
            progress(f"{n:,} partitions loaded twice")
            with_index = timed_queries(catalog.call, "indexed", reps, 3, catalog)
            without = timed_queries(catalog.call, "plain", reps, 3, catalog)
            results[n] = {}
            for name in QUERIES:
                s_i, c_i, plan = with_index[name]
                s_p, c_p, _ = without[name]
                report.check(f"{n:,}: {name}: same partitions with and without the index", c_i == c_p,
                             f"{c_i} vs {c_p}")
                used = ",".join(plan["keys_used"]) if plan and plan["index"] else "no index"
                report.timing(f"{n:,} partitions", f"{name} [index: {used}]", s_i,
                              f"{c_i:,} partitions; {plan['rows_scanned']:,} rows read" if plan else "")
                report.timing(f"{n:,} partitions", f"{name} [table without index]", s_p, f"{c_p:,} partitions")
                results[n][name] = {"indexed": median(s_i), "plain": median(s_p), "used": used}
            progress(f"{n:,}: selective indexed {results[n][SELECTIVE]['indexed'] * 1000:.1f} ms, "
                     f"without index {results[n][SELECTIVE]['plain'] * 1000:.0f} ms")
        # moto's Glue, in-process through boto3, as the peer.
        try:
            import boto3
            from moto import mock_aws
        except ImportError as e:
            report.notes.append(f"moto not installed: {e}")
        else:
            with mock_aws():
                glue = boto3.client("glue", region_name="us-east-1")

                def call(op: str, params: dict) -> dict:
                    from skiplake.catalog.operations import method_name
                    return getattr(glue, method_name(op))(**params)

                glue.create_database(DatabaseInput={"Name": "sales"})
                glue.create_table(DatabaseName="sales", TableInput={"Name": "plain", "PartitionKeys": KEYS})
                secs = fill(call, "plain", partitions(moto_size))
                report.timing(f"moto {moto_size:,}", "BatchCreatePartition (all batches)", [secs],
                              f"{moto_size / secs:,.0f} partitions/s")
                moto = timed_queries(call, "plain", 3, 1)
                for name, (s, c, _) in moto.items():
                    report.timing(f"moto {moto_size:,}", name, s, f"{c:,} partitions")
                if moto_size in results:
                    ours = results[moto_size][SELECTIVE]["indexed"]
                    report.ratio(f"moto / skiplake indexed, {SELECTIVE}, {moto_size:,}", median(moto[SELECTIVE][0]) / ours)
                    report.extra["moto_ratio"] = median(moto[SELECTIVE][0]) / ours
    big = max(sizes)
    sel = results[big][SELECTIVE]
    report.goal(f"selective indexed GetPartitions p50 at {big:,}", sel["indexed"], 0.020)
    report.goal(f"speedup over the full scan at {big:,}", sel["plain"] / sel["indexed"], 100.0, unit="x", at_least=True)
    report.headline(f"selective GetPartitions at {big:,} partitions, indexed", sel["indexed"],
                    note=f"{sel['plain'] / sel['indexed']:,.0f}x the full scan's {sel['plain']:.2f} s"
                    + (f"; moto's Glue {report.extra['moto_ratio']:.0f}x slower at {moto_size:,}"
                       if "moto_ratio" in report.extra else ""))
    if len(sizes) >= 2:
        small = min(sizes)
        growth = sel["indexed"] / results[small][SELECTIVE]["indexed"]
        report.ratio(f"indexed latency {big:,} / {small:,} partitions", growth,
                     f"data grew {big // small}x: sub-linear if well below that")
        report.check("indexed latency grows sub-linearly", growth < (big / small) / 4, f"{growth:.2f}x")
    return finish(report, args)


if __name__ == "__main__":
    sys.exit(main())
