"""Benchmark 4: concurrent blind appends to one table from 1, 2, 4 and 8 OS processes.

Each process is a real separate process (multiprocessing, 'spawn' context), and every process of
a run appends to the same table on the local filesystem. All start together on an Event, after
each has imported its libraries and made one untimed warm-up append to a private scratch table.
Each process then appends for a fixed wall-clock duration (--duration; a commit under way at the
deadline is finished and counted). One commit is one small Parquet file of --rows rows (long,
int, double, string), the same data for both contenders:

  skiplake   pyarrow writes the file into the table folder under a unique name; its stats come
             from the footer (skiplake.log.stats.file_stats); an AddFile (log path from
             skiplake.layout.partitioning.to_log_path); Snapshot.load(path); then
             skiplake.txn.commit(snapshot, [add], "WRITE", {"mode": "Append"}), a blind
             append that retries past other writers' commits by itself. CommitResult.attempts - 1
             is the number of retries.
  deltalake  deltalake.write_deltalake(path, table, mode="append"). delta-rs does not report its
             retries; an exception it raises is counted as an error and the loop goes on.

Latency is one whole append: for skiplake file write + stats + snapshot load + commit, for
deltalake the write_deltalake call (which also writes the file, loads the table and commits).
Each contender gets a fresh table per run: skiplake's is created with skiplake.txn.create,
deltalake's by a first write_deltalake (version 0, one file). Both have
delta.checkpointInterval = 10 (skiplake's default; delta-rs's is 100), as in benchmark 3.
Contenders take turns going first (per process count and per repetition).

Durability differs: skiplake fsyncs every commit attempt (LocalStorage.put_if_absent: temp file,
fsync, link); delta-rs on the local filesystem writes its commit with a rename/link and no fsync
(strace shows none). The writer processes time their fsync calls (os.fsync wrapped in the
process; skiplake itself is not changed), and --skiplake-no-fsync, a diagnostic only, makes them
no-ops to show what fsync costs. Per run the benchmark also records the writers' CPU time and the
machine-wide busy / iowait / steal shares from /proc/stat (the machine is shared).

After every run the table is checked: for skiplake, versions 1..N are exactly the N acknowledged
commits (all distinct), the snapshot has exactly the acknowledged files, and deltalake reads the
table with N x rows rows; for deltalake, its version and row count match its acknowledged writes.

    .venv/bin/python -m benchmarks.bench_concurrency [--quick] [--json] [--procs 1,2,4,8] [--duration S]
                                                    [--rows N] [--checkpoint-interval N] [--skiplake-no-fsync]
"""
from __future__ import annotations

import multiprocessing as mp
import os
import queue
import re
import statistics
import sys
import time
import traceback
import uuid
from collections import Counter
from typing import Any

from benchmarks.common import Progress, Report, base_parser, command_line, finish, rotated, workdir

SKIPLAKE = "skiplake"
DELTA = "deltalake"
CONTENDERS = [SKIPLAKE, DELTA]
NCORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
COLUMNS = [("id", "long"), ("writer", "integer"), ("value", "double"), ("name", "string")]


# ------------------------------------------------------------------------------------------ data

def make_batch(worker: int, seq: int, rows: int):
    """The small table one append writes; ids are unique across workers and appends."""
    import pyarrow as pa
    base = (worker * 1_000_000 + seq) * rows
    return pa.table({
        "id": pa.array(range(base, base + rows), pa.int64()),
        "writer": pa.array([worker] * rows, pa.int32()),
        "value": pa.array([((base + i) % 9973) * 0.5 for i in range(rows)], pa.float64()),
        "name": pa.array([f"w{worker}-s{seq}-r{i}" for i in range(rows)], pa.string()),
    })


def skiplake_schema():
    from skiplake.log.schema import Field, Schema
    return Schema(tuple(Field(n, t) for n, t in COLUMNS))


def create_skiplake_table(path: str, checkpoint_interval: int) -> None:
    from skiplake.log.actions import Metadata
    from skiplake.txn import create
    create(path, Metadata.new(skiplake_schema(), [], {"delta.checkpointInterval": str(checkpoint_interval)}))


def create_delta_table(path: str, rows: int, checkpoint_interval: int) -> None:
    from deltalake import write_deltalake
    write_deltalake(path, make_batch(999, 0, rows), mode="error",
                    configuration={"delta.checkpointInterval": str(checkpoint_interval)})


# --------------------------------------------------------------------------------------- writers

class SkiplakeWriter:
    """File write + footer stats + AddFile + Snapshot.load + commit; the parts are timed."""

    def __init__(self, path: str, worker: int) -> None:
        import pyarrow.parquet as pq

        from skiplake.log.actions import AddFile
        from skiplake.log.paths import to_log_path
        from skiplake.log.snapshot import Snapshot
        from skiplake.log.stats import file_stats
        from skiplake.txn import commit
        self.path, self.worker = path, worker
        self.schema = skiplake_schema()
        self._pq, self._AddFile, self._commit, self._Snapshot = pq, AddFile, commit, Snapshot
        self._stats, self._to_log_path = file_stats, to_log_path

    def append(self, batch) -> dict[str, Any]:
        p = time.perf_counter
        t0 = p()
        name = f"part-{self.worker:05d}-{uuid.uuid4()}-c000.snappy.parquet"
        full = os.path.join(self.path, name)
        self._pq.write_table(batch, full, compression="snappy")
        st = os.stat(full)
        t1 = p()
        stats = self._stats(full, self.schema, [])
        add = self._AddFile(self._to_log_path(name), {}, st.st_size, int(st.st_mtime * 1000), True, stats)
        t2 = p()
        snap = self._Snapshot.load(self.path)
        t3 = p()
        result = self._commit(snap, [add], "WRITE", {"mode": "Append"})
        t4 = p()
        return {"version": result.version, "attempts": result.attempts, "checkpointed": result.checkpointed,
                "path": add.path, "read_version": snap.version,
                "write": t1 - t0, "stats": t2 - t1, "load": t3 - t2, "commit": t4 - t3}


class DeltaWriter:
    def __init__(self, path: str, worker: int) -> None:
        from deltalake import write_deltalake
        self.path = path
        self._write = write_deltalake

    def append(self, batch) -> dict[str, Any]:
        self._write(self.path, batch, mode="append")
        return {}


def _warm_up(kind: str, scratch: str, worker: int, rows: int) -> None:
    """One untimed append to a private table: imports, first-call costs, the tokio runtime."""
    if kind == SKIPLAKE:
        create_skiplake_table(scratch, 10)
        SkiplakeWriter(scratch, worker).append(make_batch(worker, 0, rows))
    else:
        create_delta_table(scratch, rows, 10)
        DeltaWriter(scratch, worker).append(make_batch(worker, 0, rows))


def _worker(kind: str, path: str, worker: int, duration: float, rows: int, scratch: str,
            ready, start, results, no_fsync: bool = False) -> None:
    """One writer process: warm up, say ready, wait for the start, append until the deadline."""
    try:
        fsyncs = [0, 0.0]  # calls, seconds: skiplake's only fsyncs are its log writes (commits, checkpoints)
        if kind == SKIPLAKE:
            real_fsync = os.fsync

            def fsync(fd: int) -> None:
                t = time.perf_counter()
                if not no_fsync:  # diagnostic only (--skiplake-no-fsync): commits are then not durable
                    real_fsync(fd)
                fsyncs[0] += 1
                fsyncs[1] += time.perf_counter() - t
            os.fsync = fsync
        _warm_up(kind, scratch, worker, rows)
        writer = SkiplakeWriter(path, worker) if kind == SKIPLAKE else DeltaWriter(path, worker)
        ready.put(worker)
        start.wait()
        t_start = time.time()
        p0 = time.perf_counter()
        cpu0 = time.process_time()  # this process's CPU time, all its threads (delta-rs runs several)
        fsyncs[:] = [0, 0.0]
        commits: list[dict[str, Any]] = []
        errors: Counter[str] = Counter()
        error_s: list[float] = []  # how long the appends that raised took
        examples: dict[str, str] = {}  # one full message per kind of error
        seq = 0
        while time.perf_counter() - p0 < duration:
            seq += 1
            batch = make_batch(worker, seq, rows)
            t0 = time.perf_counter()
            try:
                rec = writer.append(batch)
            except Exception as e:  # data, not a failure of the benchmark
                first_line = str(e).splitlines()[0][:300] if str(e) else ""
                # one key per kind of error: the table path and the numbers (versions) taken out
                kind_of = re.sub(r"\d+", "N", first_line.replace(path, "<table>"))
                errors[f"{type(e).__name__}: {kind_of}"] += 1
                examples.setdefault(f"{type(e).__name__}: {kind_of}", f"{type(e).__name__}: {first_line}")
                error_s.append(time.perf_counter() - t0)
                continue
            rec["latency"] = time.perf_counter() - t0
            commits.append(rec)
        cpu = time.process_time() - cpu0
        results.put({"worker": worker, "start": t_start, "end": time.time(), "cpu_s": cpu,
                     "fsync_calls": fsyncs[0], "fsync_s": fsyncs[1], "commits": commits,
                     "errors": dict(errors), "error_examples": examples, "error_s": error_s, "appends_tried": seq})
    except BaseException:
        results.put({"worker": worker, "fatal": traceback.format_exc()})


# ------------------------------------------------------------------------------------------ runs

def proc_stat() -> list[int]:
    """The machine-wide CPU time counters (jiffies) of /proc/stat's first line; [] where there is none."""
    try:
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return []


def cpu_shares(before: list[int], after: list[int]) -> dict[str, float] | None:
    """Shares of the machine's CPU time between two proc_stat() readings: busy, iowait, steal, idle."""
    if not before or not after:
        return None
    d = [b - a for a, b in zip(before, after)]
    names = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
    v = dict(zip(names, d + [0] * (len(names) - len(d))))
    total = sum(v.values()) or 1
    return {"busy": round((v["user"] + v["nice"] + v["system"] + v["irq"] + v["softirq"]) / total, 3),
            "iowait": round(v["iowait"] / total, 3), "steal": round(v["steal"] / total, 3),
            "idle": round(v["idle"] / total, 3)}


def run_once(ctx, kind: str, path: str, procs: int, duration: float, rows: int, scratch_root: str,
             no_fsync: bool = False, timeout: float = 600.0) -> dict[str, Any]:
    ready, results, start = ctx.Queue(), ctx.Queue(), ctx.Event()
    workers = [ctx.Process(target=_worker, name=f"{kind}-{w}", daemon=True,
                           args=(kind, path, w, duration, rows, os.path.join(scratch_root, f"{kind}-{w}"),
                                 ready, start, results, no_fsync))
               for w in range(procs)]
    t_spawn = time.perf_counter()
    for w in workers:
        w.start()
    outs: list[dict[str, Any]] = []
    n_ready = 0
    deadline = time.time() + timeout
    while n_ready < procs:
        try:
            ready.get(timeout=0.5)
            n_ready += 1
        except queue.Empty:
            while True:  # a worker that failed before it was ready has left its traceback
                try:
                    outs.append(results.get_nowait())
                except queue.Empty:
                    break
            fatal = [o["fatal"] for o in outs if "fatal" in o]
            if fatal or time.time() > deadline:
                start.set()
                for w in workers:
                    w.join(5)
                    if w.is_alive():
                        w.terminate()
                raise RuntimeError(f"{kind} worker failed before the start:\n" + "\n".join(fatal or ["timeout"]))
    spawn_s = time.perf_counter() - t_spawn
    stat0 = proc_stat()
    start.set()
    while len(outs) < procs:
        outs.append(results.get(timeout=duration + timeout))
    machine = cpu_shares(stat0, proc_stat())
    for w in workers:
        w.join(30)
    fatal = [o["fatal"] for o in outs if "fatal" in o]
    if fatal:
        raise RuntimeError(f"{kind} worker failed:\n" + "\n".join(fatal))
    outs.sort(key=lambda o: o["worker"])
    window = max(o["end"] for o in outs) - min(o["start"] for o in outs)
    commits = [c for o in outs for c in o["commits"]]
    errors: Counter[str] = Counter()
    for o in outs:
        errors.update(o["errors"])
    return {"kind": kind, "procs": procs, "path": path, "window_s": window, "spawn_ready_s": spawn_s,
            "machine_cpu": machine,
            "cpu_s": sum(o["cpu_s"] for o in outs), "fsync_calls": sum(o["fsync_calls"] for o in outs),
            "fsync_s": sum(o["fsync_s"] for o in outs),
            "start_skew_s": max(o["start"] for o in outs) - min(o["start"] for o in outs),
            "commits": commits, "errors": dict(errors), "error_s": [x for o in outs for x in o["error_s"]],
            "error_examples": {k: v for o in outs for k, v in o["error_examples"].items()},
            "per_worker": [{"worker": o["worker"], "commits": len(o["commits"]),
                            "errors": sum(o["errors"].values())} for o in outs]}


# ---------------------------------------------------------------------------------------- checks

def verify_skiplake(run: dict[str, Any], rows: int) -> list[tuple[str, bool, str]]:
    from deltalake import DeltaTable

    from skiplake.log.snapshot import Snapshot, list_log, log_storage
    path, commits = run["path"], run["commits"]
    n = len(commits)
    versions = [c["version"] for c in commits]
    listing = list_log(log_storage(path))
    snap = Snapshot.load(path)
    live = set(snap.files.column("path").to_pylist())
    acked = {c["path"] for c in commits}
    dt = DeltaTable(path)
    d_rows = dt.to_pyarrow_table().num_rows
    p = run["procs"]
    return [
        (f"skiplake, {p} proc: acknowledged versions distinct and exactly 1..N",
         len(set(versions)) == n and sorted(versions) == list(range(1, n + 1)),
         f"{n} acknowledged commits, {len(set(versions))} distinct versions, range "
         f"{min(versions, default=None)}..{max(versions, default=None)}"),
        (f"skiplake, {p} proc: log has N commits after version 0",
         sorted(listing.commits) == list(range(0, n + 1)) and snap.version == n,
         f"latest version {snap.version}, {len(listing.commits)} commit files"),
        (f"skiplake, {p} proc: snapshot files = acknowledged appends",
         snap.num_files == n and live == acked, f"{snap.num_files} live files, {len(acked)} acknowledged, "
         f"{len(live ^ acked)} differ"),
        (f"skiplake, {p} proc: deltalake reads N x rows",
         d_rows == n * rows and dt.version() == n, f"deltalake reads v{dt.version()} with {d_rows:,} rows "
         f"(expected v{n}, {n * rows:,})"),
        (f"skiplake, {p} proc: no append raised (load or commit)", not run["errors"],
         "; ".join(f"x{v} {k} (e.g. {run['error_examples'].get(k, k)})" for k, v in run["errors"].items()) or "none"),
    ]


def last_checkpoint_lag(path: str) -> dict[str, Any]:
    """Where `_last_checkpoint` points vs the newest complete checkpoint (a hint; informational)."""
    from skiplake.log.checkpoint import read_last_checkpoint
    from skiplake.log.snapshot import list_log, log_storage
    storage = log_storage(path)
    newest = max(list_log(storage).checkpoints, default=None)
    last = read_last_checkpoint(storage)
    return {"newest_checkpoint": newest, "last_checkpoint_points_to": last.get("version") if last else None}


def verify_delta(run: dict[str, Any], rows: int) -> list[tuple[str, bool, str]]:
    import pyarrow as pa
    from deltalake import DeltaTable
    path = run["path"]
    n, n_err = len(run["commits"]), sum(run["errors"].values())
    dt = DeltaTable(path)
    v = dt.version()
    d_rows = dt.to_pyarrow_table().num_rows
    files = pa.table(dt.get_add_actions(flatten=True)).num_rows
    log_commits = sorted(int(f[:20]) for f in os.listdir(os.path.join(path, "_delta_log")) if f.endswith(".json")
                         and f[:20].isdigit())
    # Version 0 is the creating write. An append that raised may still have committed (e.g. a
    # failure after its commit): the version may exceed the acknowledged count by at most the errors.
    ok = (n <= v <= n + n_err and log_commits == list(range(0, v + 1)) and d_rows == (v + 1) * rows
          and files == v + 1)
    return [(f"deltalake, {run['procs']} proc: version and rows match acknowledged writes", ok,
             f"{n} acknowledged appends, {n_err} errors; table at v{v} ({len(log_commits)} commit files), "
             f"{files} files, {d_rows:,} rows (expected v{n}..v{n + n_err}, (v+1) x {rows} rows)")]


# --------------------------------------------------------------------------------------- summary

def pct(samples: list[float], q: float) -> float | None:
    if not samples:
        return None
    s = sorted(samples)
    return s[min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))]


def _ms(x: float | None, digits: int = 1) -> float | None:
    return None if x is None else round(x * 1000, digits)


def summarize(runs: list[dict[str, Any]], kind: str, procs: int) -> dict[str, Any]:
    mine = [r for r in runs if r["kind"] == kind and r["procs"] == procs]
    commits = [c for r in mine for c in r["commits"]]
    lat = [c["latency"] for c in commits]
    window = sum(r["window_s"] for r in mine)
    errors: Counter[str] = Counter()
    for r in mine:
        errors.update(r["errors"])
    out: dict[str, Any] = {
        "contender": kind, "procs": procs, "reps": len(mine), "commits": len(commits),
        "window_s": round(window, 3), "commits_per_s": round(len(commits) / window, 2) if window else None,
        "commits_per_s_per_rep": [round(len(r["commits"]) / r["window_s"], 2) for r in mine],
        "latency_ms": {"median": _ms(pct(lat, 0.5)), "p90": _ms(pct(lat, 0.9)), "p95": _ms(pct(lat, 0.95)),
                       "p99": _ms(pct(lat, 0.99)), "max": _ms(max(lat, default=None))},
        "errors": sum(errors.values()), "error_messages": dict(errors.most_common(5)),
        "error_examples": {k: v for r in mine for k, v in r["error_examples"].items()},
        "error_latency_median_ms": _ms(statistics.median([x for r in mine for x in r["error_s"]]))
        if any(r["error_s"] for r in mine) else None,
        # CPU time of the writer processes per commit, and as a share of the machine's cores
        "cpu_ms_per_commit": round(sum(r["cpu_s"] for r in mine) * 1000 / len(commits), 2) if commits else None,
        "cpu_busy_share": round(sum(r["cpu_s"] for r in mine) / window / NCORES, 3) if window else None,
        # the whole machine over the run (from /proc/stat): busy includes other sessions' work
        "machine_cpu": [r["machine_cpu"] for r in mine],
        "per_worker_commits": [[w["commits"] for w in r["per_worker"]] for r in mine],
        "start_skew_ms": [_ms(r["start_skew_s"], 2) for r in mine],
        "spawn_ready_s": [round(r["spawn_ready_s"], 2) for r in mine],
    }
    if kind == SKIPLAKE:
        out["last_checkpoint"] = [r.get("last_checkpoint") for r in mine]
    if kind == SKIPLAKE and commits:
        attempts = [c["attempts"] for c in commits]
        retries = [a - 1 for a in attempts]
        plain = [c for c in commits if not c["checkpointed"]]
        cps = [c for c in commits if c["checkpointed"]]
        gap = [c["version"] - 1 - c["read_version"] for c in commits]  # versions committed since the load
        out.update({
            "fsyncs_per_commit": round(sum(r["fsync_calls"] for r in mine) / len(commits), 2),
            "fsync_ms_per_commit": round(sum(r["fsync_s"] for r in mine) * 1000 / len(commits), 2),
            "retries": sum(retries), "retries_per_commit": round(sum(retries) / len(commits), 3),
            "commits_retried_share": round(sum(1 for r in retries if r) / len(commits), 3),
            "max_attempts": max(attempts), "attempts_histogram": dict(sorted(Counter(attempts).items())),
            "stale_versions_per_commit": round(statistics.mean(gap), 3),
            "checkpoints": len(cps),
            "parts_median_ms": {k: _ms(statistics.median([c[k] for c in commits]), 2)
                                for k in ("write", "stats", "load", "commit")},
            "commit_no_checkpoint_median_ms": _ms(statistics.median([c["commit"] for c in plain]), 2) if plain else None,
            "commit_with_checkpoint_median_ms": _ms(statistics.median([c["commit"] for c in cps]), 2) if cps else None,
            "latency_with_checkpoint_median_ms": _ms(statistics.median([c["latency"] for c in cps]), 2) if cps else None,
        })
    if kind == DELTA:
        out["checkpoints"] = sum(
            sum(1 for f in os.listdir(os.path.join(r["path"], "_delta_log")) if ".checkpoint." in f) for r in mine)
    return out


def fsync_floor(path: str, n: int = 50) -> list[float]:
    """The time of LocalStorage.put_if_absent of a ~1 KB commit: temp write + fsync + link + unlink."""
    from skiplake.log.storage import LocalStorage
    storage = LocalStorage(path)
    data = b'{"commitInfo":{}}\n' + b"x" * 1000 + b"\n"
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        storage.put_if_absent(f"{i:020d}.json", data)
        out.append(time.perf_counter() - t0)
    return out


class ConcurrencyReport(Report):
    def render(self, file=None) -> None:
        from rich.console import Console
        from rich.table import Table
        super().render(file)
        console = Console(file=file or sys.stdout, width=240)
        t = Table(title="concurrent blind appends to one table (all processes of a run together)")
        cols = ("procs", "contender", "commits", "commits/s", "per rep", "median", "p95", "retries/commit",
                "retried", "max attempts", "errors", "ckpts", "CPU ms/commit", "CPU busy", "machine busy/iowait/steal")
        for c in cols:
            t.add_column(c, justify="left" if c in ("contender", "per rep") else "right")
        for s in self.extra["summary"]:
            sk = s["contender"] == SKIPLAKE
            t.add_row(str(s["procs"]), s["contender"], str(s["commits"]), f"{s['commits_per_s']:.1f}",
                      ", ".join(f"{x:.1f}" for x in s["commits_per_s_per_rep"]),
                      f"{s['latency_ms']['median']:.1f} ms", f"{s['latency_ms']['p95']:.1f} ms",
                      f"{s['retries_per_commit']:.2f}" if sk else "n/a",
                      f"{s['commits_retried_share'] * 100:.0f}%" if sk else "n/a",
                      str(s["max_attempts"]) if sk else "n/a", str(s["errors"]), str(s["checkpoints"]),
                      f"{s['cpu_ms_per_commit']:.1f}", f"{s['cpu_busy_share'] * 100:.0f}%",
                      "; ".join(f"{m['busy'] * 100:.0f}/{m['iowait'] * 100:.0f}/{m['steal'] * 100:.0f}%"
                                for m in s["machine_cpu"] if m))
        console.print(t)
        t = Table(title="skiplake: medians of the parts of one append (ms)")
        for c in ("procs", "write parquet", "footer stats", "Snapshot.load", "commit()", "commit() no ckpt",
                  "commit() with ckpt", "versions behind at load", "fsyncs/commit", "fsync ms/commit"):
            t.add_column(c, justify="right")
        for s in self.extra["summary"]:
            if s["contender"] != SKIPLAKE or not s["commits"]:
                continue
            pm = s["parts_median_ms"]
            t.add_row(str(s["procs"]), f"{pm['write']:.2f}", f"{pm['stats']:.2f}", f"{pm['load']:.2f}",
                      f"{pm['commit']:.2f}", str(s["commit_no_checkpoint_median_ms"]),
                      str(s["commit_with_checkpoint_median_ms"]), f"{s['stale_versions_per_commit']:.2f}",
                      f"{s['fsyncs_per_commit']:.2f}", f"{s['fsync_ms_per_commit']:.2f}")
        console.print(t)
        for s in self.extra["summary"]:
            for msg, k in s["error_messages"].items():
                console.print(f"{s['contender']} {s['procs']} proc error x{k}: {msg}  "
                              f"(e.g. {s['error_examples'].get(msg, msg)})")


# ------------------------------------------------------------------------------------------ main

def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__.split("\n")[0])
    p.add_argument("--procs", default=None, help="process counts, comma-separated (default 1,2,4,8; quick 1,2,4)")
    p.add_argument("--duration", type=float, default=None, help="seconds each process appends (default 10; quick 2)")
    p.add_argument("--rows", type=int, default=100, help="rows per appended file (default %(default)s)")
    p.add_argument("--checkpoint-interval", type=int, default=10, help="delta.checkpointInterval of both tables")
    p.add_argument("--skiplake-no-fsync", action="store_true",
                   help="diagnostic: make os.fsync a no-op in skiplake's writer processes (as delta-rs, which "
                        "does not fsync on the local filesystem); commits are then not durable")
    args = p.parse_args(argv)
    procs = [int(x) for x in (args.procs or ("1,2,4" if args.quick else "1,2,4,8")).split(",")]
    duration = args.duration or (2.0 if args.quick else 10.0)
    reps = args.reps or (1 if args.quick else 2)
    extra = ([f"--procs {args.procs}"] if args.procs else []) + ([f"--duration {args.duration:g}"] if args.duration else []) \
        + ([f"--rows {args.rows}"] if args.rows != 100 else []) \
        + ([f"--checkpoint-interval {args.checkpoint_interval}"] if args.checkpoint_interval != 10 else []) \
        + (["--skiplake-no-fsync"] if args.skiplake_no_fsync else [])
    progress = Progress("concurrency")
    report = ConcurrencyReport(
        benchmark="concurrency",
        title=f"Concurrent blind appends to one table from {', '.join(map(str, procs))} processes, against delta-rs",
        command=command_line("bench_concurrency", args, extra),
        params={"procs": procs, "duration_s_per_process": duration, "reps": reps, "rows_per_append": args.rows,
                "columns": "long, int, double, string", "checkpoint_interval": args.checkpoint_interval,
                "start_method": "spawn", "filesystem": "local", "skiplake_fsync": not args.skiplake_no_fsync},
    )
    ctx = mp.get_context("spawn")
    runs: list[dict[str, Any]] = []
    with workdir("concurrency", args.workdir, args.keep, progress) as wd:
        progress("reference: LocalStorage.put_if_absent of a 1 KB commit (temp write + fsync + link), 50 times")
        floor = fsync_floor(str(wd / "fsync-floor"))
        report.timing("reference", "LocalStorage.put_if_absent, 1 KB (one commit attempt's I/O)", floor,
                      "includes one fsync; the floor of every skiplake commit attempt")
        step = 0
        for i, n in enumerate(procs):
            for rep in range(reps):
                for kind in rotated(CONTENDERS, i + rep):
                    step += 1
                    path = str(wd / f"p{n}-r{rep}-{kind}")
                    if kind == SKIPLAKE:
                        create_skiplake_table(path, args.checkpoint_interval)
                    else:
                        create_delta_table(path, args.rows, args.checkpoint_interval)
                    progress(f"[{step}/{len(procs) * reps * 2}] {n} process(es), {kind}, rep {rep + 1}/{reps}: "
                             f"spawning, warming up, then {duration:g} s of appends")
                    run = run_once(ctx, kind, path, n, duration, args.rows, str(wd / "scratch" / f"p{n}-r{rep}"),
                                   no_fsync=args.skiplake_no_fsync)
                    runs.append(run)
                    if kind == SKIPLAKE:
                        run["last_checkpoint"] = last_checkpoint_lag(path)
                    checks = verify_skiplake(run, args.rows) if kind == SKIPLAKE else verify_delta(run, args.rows)
                    for name, ok, detail in checks:
                        report.check(name + (f" (rep {rep + 1})" if reps > 1 else ""), ok, detail)
                    lat = [c["latency"] for c in run["commits"]]
                    msg = (f"  {len(run['commits'])} commits in {run['window_s']:.2f} s = "
                           f"{len(run['commits']) / run['window_s']:.1f}/s, latency median "
                           f"{_ms(pct(lat, 0.5))} ms, p95 {_ms(pct(lat, 0.95))} ms")
                    if kind == SKIPLAKE and run["commits"]:
                        retries = sum(c["attempts"] - 1 for c in run["commits"])
                        msg += f", retries/commit {retries / len(run['commits']):.2f}"
                    msg += f", errors {sum(run['errors'].values())}; checks " + \
                        ("ok" if all(ok for _, ok, _ in checks) else "FAILED")
                    progress(msg)

        summary = [summarize(runs, kind, n) for n in procs for kind in CONTENDERS]
    report.extra["summary"] = summary
    by = {(s["contender"], s["procs"]): s for s in summary}
    for n in procs:
        sk, de = by[(SKIPLAKE, n)], by[(DELTA, n)]
        if sk["commits_per_s"] and de["commits_per_s"]:
            per_rep = [a / b for a, b in zip(sk["commits_per_s_per_rep"], de["commits_per_s_per_rep"]) if b]
            report.ratio(f"skiplake / deltalake commits/s, {n} process(es)", sk["commits_per_s"] / de["commits_per_s"],
                         "pooled over reps; per rep: " + ", ".join(f"{x:.2f}" for x in per_rep))
            report.headline(f"{n} process{'es' if n > 1 else ''}", sk["commits_per_s"], "/s",
                            f"{sk['commits_per_s'] / de['commits_per_s']:.2f}x delta-rs; errors: {sk['errors']}, "
                            f"delta-rs {de['errors']}")
    for kind in CONTENDERS:
        one = by[(kind, procs[0])]["commits_per_s"]
        for n in procs[1:]:
            if one:
                report.ratio(f"{kind}: commits/s at {n} vs {procs[0]} process(es)", by[(kind, n)]["commits_per_s"] / one,
                             "scaling on this machine")
    report.notes.append("latency = one whole append (file write + stats + load + commit for skiplake; the "
                        "write_deltalake call for deltalake); commits/s = commits of all processes / the run's "
                        "wall-clock window (first start to last finish)")
    report.notes.append(f"CPU busy = CPU time of all writer processes (every thread) / (window x {NCORES} cores); "
                        "CPU ms/commit = that CPU time / commits")
    return finish(report, args)


if __name__ == "__main__":
    sys.exit(main())
