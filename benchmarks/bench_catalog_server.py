"""Benchmark 16: the catalog server under load from concurrent boto3 clients, on SQLite and
PostgreSQL, against the server it replaced.

One table of 1,000,000 partitions keyed like benchmark 7's sales table (its generator)
with a partition index on (country, category, year). Three operations, each a closed loop per
client (a client sends its next request when the previous answer is in):
  - selective GetPartitions: country, category, year and month (15 partitions; the index reads 192)
  - broad GetPartitions: country, category, year > 2018 (400 partitions, one page)
  - BatchCreatePartition: 100 new partitions per call into an indexed table
at 1, 8 and 32 clients, spread over client processes (boto3 is CPU-hungry: one process per 4
clients at most, so the clients' own interpreter lock is not what is measured). Every client
process is forked before the measured window; each window has a warm-up (answers discarded), and
the contenders take turns going first. boto3 retries are off, so a refused request counts as an
error, not a slow success.

Contenders, each its own process tree on loopback, all over the same database:
  - the replaced server: `skiplake catalog serve` at commit BASELINE (the standard library's
    ThreadingHTTPServer), from `git archive`, no authentication;
  - uvicorn: `skiplake catalog serve --workers W`, access log to a file, no authentication;
  - uvicorn + SigV4: the same with --credentials (every request signed and checked; writes
    recorded against replay in the database).

    .venv/bin/python -m benchmarks.bench_catalog_server [--quick] [--partitions N] [--clients 1,8,32]
        [--seconds S] [--workers W] [--dbs sqlite,postgresql] [--json] [--out FILE]
"""
from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from benchmarks.bench_catalog import KEYS, fill, partitions
from benchmarks.common import Progress, Report, base_parser, finish, rotated, workdir
from testing_support.paths import DEFAULT_BASE, REPO

BASELINE = "00f9f7a"  # the last commit whose catalog server is the standard library's
SELECTIVE = "country = 'C07' AND category = 'cat11' AND year = '2019' AND month = 2"
BROAD = "country = 'C07' AND category = 'cat11' AND year > '2018'"
OPERATIONS = ("selective GetPartitions", "broad GetPartitions", "BatchCreatePartition")
KEY_ID, SECRET = "AKLOADTEST", "load-test-secret"
INDEX = [{"IndexName": "ccy", "Keys": ["country", "category", "year"]}]


@dataclass(frozen=True)
class Contender:
    name: str
    endpoint: str
    pid: int            # the server's process: its tree's CPU time is the server's cost


# ------------------------------------------------------------------------------ the databases

def cached_sqlite(n: int, progress: Progress) -> Path:
    """A SQLite catalog of `n` partitions, built once under bench-data and reused (copied) by runs."""
    path = DEFAULT_BASE / "catalog-server" / f"catalog-{n}.db"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".building")
    for p in tmp.parent.glob(tmp.name + "*"):
        p.unlink()
    secs = build(f"sqlite:///{tmp}", n)
    progress(f"SQLite catalog of {n:,} partitions built in {secs:.0f} s (cached as {path})")
    tmp.rename(path)
    return path


def build(url: str, n: int) -> float:
    from skiplake.catalog.service import GlueCatalog
    catalog = GlueCatalog(url)
    catalog.call("CreateDatabase", {"DatabaseInput": {"Name": "sales"}})
    catalog.call("CreateTable", {"DatabaseName": "sales", "TableInput": {"Name": "indexed", "PartitionKeys": KEYS},
                                 "PartitionIndexes": INDEX})
    catalog.call("CreateTable", {"DatabaseName": "sales", "TableInput": {"Name": "landing", "PartitionKeys": KEYS},
                                 "PartitionIndexes": INDEX})
    secs = fill(catalog.call, "indexed", partitions(n))
    catalog.engine.dispose()
    return secs


# ------------------------------------------------------------------------------ the servers

def baseline_tree(root: Path) -> Path:
    """The repository's skiplake package as of BASELINE, unpacked under `root`."""
    out = root / f"baseline-{BASELINE}"
    out.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", BASELINE, "skiplake"], check=True,
                             capture_output=True).stdout
    tar = out / "src.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as t:
        t.extractall(out, filter="data")
    return out


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of a process and all its descendants, those it has reaped
    included (PostgreSQL's backends come and go with pooled connections), from /proc."""
    total = 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except FileNotFoundError:
        return total
    return total + sum(cpu_seconds(c) for c in children)


# ------------------------------------------------------------------------------ the load

def _client(contender: Contender) -> Any:
    import boto3
    from botocore.config import Config
    return boto3.session.Session().client(
        "glue", endpoint_url=contender.endpoint, region_name="us-east-1", aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET, config=Config(retries={"max_attempts": 1, "mode": "standard"},
                                                    max_pool_connections=2, connect_timeout=10, read_timeout=120))


def _one(glue: Any, operation: str, tag: str, n: int) -> tuple[bool, int]:
    """Run one request; (answer as expected, partitions in it)."""
    if operation == "BatchCreatePartition":
        batch = [{"Values": [tag, f"b{n}", "2020", str(1 + i // 28), f"2020-{1 + i // 28:02d}-{1 + i % 28:02d}"],
                  "StorageDescriptor": {"Location": f"/landing/{tag}/{n}/{i}"}} for i in range(100)]
        out = glue.batch_create_partition(DatabaseName="sales", TableName="landing", PartitionInputList=batch)
        return not out.get("Errors"), 100
    expression = SELECTIVE if operation.startswith("selective") else BROAD
    out = glue.get_partitions(DatabaseName="sales", TableName="indexed", Expression=expression, MaxResults=1000)
    return "NextToken" not in out, len(out["Partitions"])


def _client_process(contender: Contender, operation: str, threads: int, tag: str, start_at: float,
                    measure_from: float, end_at: float, pipe: Any) -> None:
    samples: list[tuple[float, float, str]] = []   # (sent at, seconds, "" or the error)
    sizes: set[int] = set()
    answered = [0]   # requests answered, warm-up included: what the server's CPU time was spent on
    lock = threading.Lock()

    def loop(tid: int) -> None:
        glue = _client(contender)
        n = 0
        while time.time() < start_at:
            time.sleep(0.001)
        while True:
            sent = time.time()
            if sent >= end_at:
                return
            t0 = time.perf_counter()
            try:
                ok, size = _one(glue, operation, f"{tag}-{os.getpid()}-{tid}", n)
                outcome = "" if ok else "unexpected answer"
            except Exception as e:  # noqa: BLE001 (counted, not fatal: the load goes on)
                outcome, size = type(e).__name__ + ": " + str(e)[:120], -1
            secs = time.perf_counter() - t0
            n += 1
            with lock:
                answered[0] += 1
                if sent >= measure_from:
                    samples.append((sent, secs, outcome))
                    if not outcome:
                        sizes.add(size)

    workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    time.sleep(max(0.0, start_at - time.time()))
    cpu_at_start = time.process_time()   # this process's CPU, all its threads: the clients' cost
    for w in workers:
        w.join()
    pipe.send((samples, sorted(sizes), answered[0], time.process_time() - cpu_at_start))
    pipe.close()


def run_load(contender: Contender, operation: str, clients: int, warmup: float, seconds: float,
             tag: str, per_process: int = 4, db_pid: int | None = None) -> dict[str, Any]:
    """`clients` closed-loop boto3 clients for warmup + seconds; the measured window's figures,
    and the CPU time per answered request of the server, the database and everything else."""
    procs_n = -(-clients // per_process)
    per = [clients // procs_n + (1 if i < clients % procs_n else 0) for i in range(procs_n)]
    ctx = multiprocessing.get_context("fork")
    start_at = time.time() + 1.5   # every client is created before anyone sends
    measure_from, end_at = start_at + warmup, start_at + warmup + seconds
    pipes, procs = [], []
    cpu0 = (cpu_seconds(contender.pid), cpu_seconds(db_pid) if db_pid else 0.0)
    for i, threads in enumerate(per):
        here, there = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_client_process, args=(contender, operation, threads, f"{tag}{i}", start_at,
                                                      measure_from, end_at, there))
        p.start()
        pipes.append(here)
        procs.append(p)
    samples: list[tuple[float, float, str]] = []
    sizes: set[int] = set()
    counts: list[int] = []
    clients_cpu = 0.0
    for here in pipes:
        s, z, n, cpu = here.recv()
        samples += s
        sizes.update(z)
        counts.append(n)
        clients_cpu += cpu
    for p in procs:
        p.join()
    cpu1 = (cpu_seconds(contender.pid), cpu_seconds(db_pid) if db_pid else 0.0)
    ok = sorted(secs for _, secs, err in samples if not err)
    served = max(1, sum(counts))
    server_cpu, db_cpu = (b - a for a, b in zip(cpu0, cpu1))
    errors = [err for _, _, err in samples if err]
    return {"contender": contender.name, "operation": operation, "clients": clients, "processes": procs_n,
            "requests": len(ok), "errors": len(errors), "error_kinds": sorted(set(e.split(":")[0] for e in errors)),
            "throughput": len(ok) / seconds, "p50_ms": _pct(ok, 0.50) * 1000, "p99_ms": _pct(ok, 0.99) * 1000,
            "mean_ms": (statistics.fmean(ok) * 1000) if ok else float("nan"), "answer_sizes": sorted(sizes),
            # SQLite works inside the server's processes; PostgreSQL's are the postmaster's tree.
            "server_cpu_ms": server_cpu / served * 1000, "client_cpu_ms": clients_cpu / served * 1000,
            "db_cpu_ms": db_cpu / served * 1000,
            "latencies_s": [round(x, 5) for x in ok]}


def _pct(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


# ------------------------------------------------------------------------------ the run

def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=None, help="partitions in the table (default 1,000,000)")
    parser.add_argument("--clients", default=None, help="comma-separated client counts (default 1,8,32)")
    parser.add_argument("--seconds", type=float, default=None, help="measured seconds per case (default 8)")
    parser.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds per case, discarded (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="uvicorn worker processes (default 2: the cores)")
    parser.add_argument("--dbs", default="sqlite,postgresql", help="databases to run on (default both)")
    parser.add_argument("--operations", default=",".join(OPERATIONS), help="subset of the operations")
    args = parser.parse_args(argv)
    n = args.partitions or (20_000 if args.quick else 1_000_000)
    clients = [int(c) for c in (args.clients or ("1,8" if args.quick else "1,8,32")).split(",")]
    seconds = args.seconds or (3.0 if args.quick else 8.0)
    operations = [o for o in OPERATIONS if o in args.operations.split(",")]
    dbs = args.dbs.split(",")
    progress = Progress("catalog-server")
    command = (".venv/bin/python -m benchmarks.bench_catalog_server" + (" --quick" if args.quick else "")
               + (f" --partitions {args.partitions}" if args.partitions else "")
               + (f" --clients {args.clients}" if args.clients else "")
               + (f" --seconds {args.seconds:g}" if args.seconds else "")
               + (f" --workers {args.workers}" if args.workers != 2 else "")
               + (f" --dbs {args.dbs}" if args.dbs != "sqlite,postgresql" else ""))
    report = Report("bench_catalog_server", f"The catalog server under {', '.join(map(str, clients))} boto3 clients, "
                    f"{n:,} partitions, {' and '.join(dbs)}, against the server it replaced", command,
                    {"partitions": n, "clients": clients, "seconds": seconds, "warmup_s": args.warmup,
                     "uvicorn_workers": args.workers, "baseline": BASELINE, "operations": operations, "dbs": dbs})
    rows: list[dict[str, Any]] = []
    expected: dict[str, dict[str, int]] = {}
    with workdir("catalog-server", args.workdir, args.keep, progress) as root:
        old_tree = baseline_tree(root)
        creds = root / "creds.json"
        creds.write_text(json.dumps({"principals": [{"access_key_id": KEY_ID, "secret_access_key": SECRET}]}))
        for db in dbs:
            with database(db, n, root, progress) as (url, db_pid):
                expected[db] = expected_sizes(url)
                rows += measure_db(db, url, db_pid, root, old_tree, creds, args, clients, seconds, operations,
                                   progress)
    summarize(report, rows, clients, dbs, expected)
    report.extra["cases"] = [{k: v for k, v in r.items() if k != "latencies_s"} for r in rows]
    return finish(report, args)


@contextlib.contextmanager
def database(db: str, n: int, root: Path, progress: Progress) -> Iterator[tuple[str, int | None]]:
    """The database's URL, and the pid of its server process (None for SQLite: in the server)."""
    if db == "sqlite":
        source = cached_sqlite(n, progress) if n >= 100_000 else None
        path = root / "catalog.db"
        if source is None:
            build(f"sqlite:///{path}", n)
        else:
            shutil.copyfile(source, path)
        progress(f"SQLite catalog ready ({path.stat().st_size / 2**20:,.0f} MiB)")
        yield f"sqlite:///{path}", None
        return
    from testing_support import postgres_server
    pg = postgres_server.start()
    try:
        url = pg.new_database()
        secs = build(url, n)
        progress(f"PostgreSQL catalog of {n:,} partitions built in {secs:.0f} s")
        with open(Path(pg.root) / "data" / "postmaster.pid") as f:
            yield url, int(f.readline())
    finally:
        pg.stop()


def expected_sizes(url: str) -> dict[str, int]:
    """Each operation's answer size, asked in-process: what every server must answer."""
    from skiplake.catalog.client import all_partitions
    from skiplake.catalog.service import GlueCatalog
    catalog = GlueCatalog(url)
    sizes = {OPERATIONS[0]: sum(1 for _ in all_partitions(catalog, "sales", "indexed", SELECTIVE)),
             OPERATIONS[1]: sum(1 for _ in all_partitions(catalog, "sales", "indexed", BROAD)),
             OPERATIONS[2]: 100}
    catalog.engine.dispose()
    return sizes


def measure_db(db: str, url: str, db_pid: int | None, root: Path, old_tree: Path, creds: Path, args: Any,
               clients: list[int], seconds: float, operations: list[str], progress: Progress) -> list[dict[str, Any]]:
    from testing_support.net import catalog_process
    log = root / f"server-{db}.log"
    new_args = ["--workers", str(args.workers), "--access-log", str(root / f"access-{db}.log")]
    rows = []
    with catalog_process(url, log=log, source=old_tree) as old, \
            catalog_process(url, *new_args, log=log) as new, \
            catalog_process(url, *new_args, "--credentials", str(creds), log=log) as signed:
        contenders = [Contender(f"stdlib server ({BASELINE})", old.endpoint, old.process.pid),
                      Contender(f"uvicorn, {args.workers} workers", new.endpoint, new.process.pid),
                      Contender(f"uvicorn, {args.workers} workers, SigV4", signed.endpoint, signed.process.pid)]
        case = 0
        for operation in operations:
            for c in clients:
                for contender in rotated(contenders, case):
                    row = run_load(contender, operation, c, args.warmup, seconds, f"{db[0]}{case}{contender.name[0]}",
                                   db_pid=db_pid)
                    row["db"] = db
                    rows.append(row)
                    progress(f"{db} {operation} x{c} {contender.name}: {row['throughput']:.1f}/s, p50 "
                             f"{row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms, {row['errors']} errors; CPU per "
                             f"request: server {row['server_cpu_ms']:.2f} ms, clients {row['client_cpu_ms']:.2f} ms, "
                             f"database {row['db_cpu_ms']:.2f} ms")
                case += 1
    return rows


def ceiling(row: dict[str, Any]) -> str:
    """The most answers per second any server could give here: the machine's cores divided by
    what the clients and the database spend per answer."""
    rest = (row["client_cpu_ms"] + row["db_cpu_ms"]) / 1000
    return f"a server using no CPU at all: {(os.cpu_count() or 1) / rest:.0f}/s at most on these cores" if rest else ""


def summarize(report: Report, rows: list[dict[str, Any]], clients: list[int], dbs: list[str],
              expected: dict[str, dict[str, int]]) -> None:
    by = {(r["db"], r["operation"], r["clients"], r["contender"]): r for r in rows}
    for r in rows:
        report.timing(f"{r['db']} {r['operation']} x{r['clients']}", r["contender"], r["latencies_s"],
                      f"{r['throughput']:.1f} req/s, p99 {r['p99_ms']:.1f} ms, {r['errors']} errors; CPU/answer "
                      f"server {r['server_cpu_ms']:.2f} + clients {r['client_cpu_ms']:.2f} + database "
                      f"{r['db_cpu_ms']:.2f} ms"
                      + (f" ({', '.join(r['error_kinds'])})" if r["error_kinds"] else ""))
    names = sorted({r["contender"] for r in rows}, key=lambda s: (not s.startswith("stdlib"), "SigV4" in s))
    old, new = names[0], names[1]
    signed = names[2] if len(names) > 2 else None
    for (db, operation, c, name), r in sorted(by.items()):
        if name == old:
            continue
        base = by[(db, operation, c, old)]
        if base["throughput"] > 0:
            report.ratio(f"{db} {operation} x{c}: {name} / stdlib throughput", r["throughput"] / base["throughput"],
                         f"p99 {r['p99_ms']:.1f} vs {base['p99_ms']:.1f} ms")
        if r["server_cpu_ms"] > 0:
            report.ratio(f"{db} {operation} x{c}: stdlib / {name} server CPU per answer",
                         base["server_cpu_ms"] / r["server_cpu_ms"],
                         f"{base['server_cpu_ms']:.2f} vs {r['server_cpu_ms']:.2f} ms; the clients used "
                         f"{r['client_cpu_ms']:.2f} ms per answer on the same cores")
    top = max(clients)
    for db in dbs:
        wrong = [f"{r['operation']} x{r['clients']} {r['contender']}: {r['answer_sizes']}" for r in rows
                 if r["db"] == db and r["answer_sizes"] != [expected[db][r["operation"]]]]
        report.check(f"{db}: every answer had the size asked in-process", not wrong,
                     "; ".join(wrong[:3]) or ", ".join(f"{k} {v}" for k, v in expected[db].items()))
    if "postgresql" in dbs and ("postgresql", OPERATIONS[0], top, new) in by:
        sel_new, sel_old = by[("postgresql", OPERATIONS[0], top, new)], by[("postgresql", OPERATIONS[0], top, old)]
        report.goal(f"PostgreSQL selective GetPartitions p99 at {top} clients ({new})", sel_new["p99_ms"] / 1000,
                    0.100)
        if signed:
            report.goal(f"PostgreSQL selective GetPartitions p99 at {top} clients ({signed})",
                        by[("postgresql", OPERATIONS[0], top, signed)]["p99_ms"] / 1000, 0.100)
        report.goal(f"PostgreSQL selective GetPartitions throughput at {top} clients, {new} / stdlib",
                    sel_new["throughput"] / max(sel_old["throughput"], 1e-9), 3.0, unit="x", at_least=True,
                    note=f"{sel_new['throughput']:.0f} vs {sel_old['throughput']:.0f}/s; {ceiling(sel_new)}")
        report.headline(f"PostgreSQL, selective GetPartitions, {top} clients", sel_new["throughput"], "/s",
                        f"p99 {sel_new['p99_ms']:.1f} ms; {sel_new['throughput'] / max(sel_old['throughput'], 1e-9):.2f}x "
                        f"the replaced server's {sel_old['throughput']:.0f}/s, p99 {sel_old['p99_ms']:.0f} ms")
    for db in dbs:
        if (db, OPERATIONS[1], top, new) in by:
            b_new, b_old = by[(db, OPERATIONS[1], top, new)], by[(db, OPERATIONS[1], top, old)]
            report.goal(f"{db}: 400-partition GetPartitions throughput at {top} clients, {new} / stdlib",
                        b_new["throughput"] / max(b_old["throughput"], 1e-9), 2.0, unit="x", at_least=True,
                        note=f"{b_new['throughput']:.0f} vs {b_old['throughput']:.0f}/s; {ceiling(b_new)}")
            report.headline(f"{db}, 400-partition GetPartitions, {top} clients", b_new["throughput"], "/s",
                            f"{b_new['throughput'] / max(b_old['throughput'], 1e-9):.2f}x the replaced server's "
                            f"{b_old['throughput']:.0f}/s")


if __name__ == "__main__":
    sys.exit(main())
