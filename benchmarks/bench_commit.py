"""Benchmark 3: a small commit on a table with 1,000 versions (goal: <= 50 ms).

The table is built through skiplake's log API: version 0 (create) and 999 tiny commits of one
AddFile each (versions 0..999), with `delta.checkpointInterval` = 10 set explicitly so that
skiplake (default 10) and delta-rs (default 100) checkpoint alike. It is then copied once per
contender, so each contender commits on an identical table. Each repetition commits one more
AddFile (no data file is written: the commit path alone is measured):

  skiplake log API      Snapshot.load(path), then skiplake.txn.commit(snapshot, [add])
  skiplake Transaction  table.begin(); txn.actions.append(add); txn.commit()   on a Table opened
                        once (the path of Table.append minus Spark's write); split into begin
                        (a snapshot load), the log commit, and the rest of txn.commit()
  deltalake             DeltaTable(path), then create_write_transaction([AddAction], mode="append")

One untimed warm-up commit per contender comes first (version 1,000), then the measured ones
(1,001 onwards). Every 10th version the commit also writes a checkpoint, so commits are reported all together
and split by whether they checkpointed. Contenders take turns going first.

    .venv/bin/python -m benchmarks.bench_commit [--quick] [--json]
"""
from __future__ import annotations

import os
import shutil
import sys
import time

from benchmarks.common import Progress, Report, base_parser, command_line, finish, median, rotated, timed, workdir
from benchmarks.synthetic import PARTITION_COLUMNS, FileFactory, LogWriter
from testing_support.paths import setup_java

LOG = "skiplake log API"
TXN = "skiplake Transaction"
DELTA = "deltalake"


def _checkpoints(path: str) -> set[str]:
    return {n for n in os.listdir(os.path.join(path, "_delta_log")) if ".checkpoint" in n}


class LogApi:
    def __init__(self, path: str) -> None:
        self.path = path

    def run(self, add) -> dict:
        from skiplake.log.snapshot import Snapshot
        from skiplake.txn import commit
        t0 = time.perf_counter()
        snap = Snapshot.load(self.path)
        t1 = time.perf_counter()
        result = commit(snap, [add], "WRITE", {"mode": "Append"})
        t2 = time.perf_counter()
        return {"load": t1 - t0, "commit": t2 - t1, "total": t2 - t0, "checkpointed": result.checkpointed,
                "version": result.version}


class TransactionPath:
    """Table.begin() + txn.actions.append(add) + txn.commit(), timed in parts by wrapping two callees."""

    def __init__(self, spark, path: str) -> None:
        import skiplake
        import skiplake.spark.writes.transaction as txn_mod
        self.table = skiplake.Table.open(spark, path)
        self.parts: dict = {}
        orig_commit = txn_mod.commit  # the log commit, as the Transaction calls it
        parts = self.parts

        def commit(*a, **k):
            t = time.perf_counter()
            r = orig_commit(*a, **k)
            parts["log_commit"] = time.perf_counter() - t
            parts["checkpointed"] = r.checkpointed
            return r

        self._patched = [(txn_mod, "commit", orig_commit)]
        txn_mod.commit = commit

    def close(self) -> None:
        for owner, name, orig in self._patched:
            setattr(owner, name, orig)

    def run(self, add) -> dict:
        self.parts.clear()
        t0 = time.perf_counter()
        txn = self.table.begin()
        t1 = time.perf_counter()
        txn.actions.append(add)
        version = txn.commit("WRITE", {"mode": "Append"})
        t2 = time.perf_counter()
        return {"load": t1 - t0, "commit": t2 - t1, "total": t2 - t0, "log_commit": self.parts["log_commit"],
                "other": (t2 - t1) - self.parts["log_commit"], "checkpointed": self.parts["checkpointed"],
                "version": version}


class Delta:
    def __init__(self, path: str) -> None:
        self.path = path

    def run(self, add) -> dict:
        from deltalake import DeltaTable
        from deltalake.transaction import AddAction
        before = _checkpoints(self.path)
        action = AddAction(add.path, add.size, add.partitionValues, add.modificationTime, True, add.stats)
        t0 = time.perf_counter()
        table = DeltaTable(self.path)
        t1 = time.perf_counter()
        table.create_write_transaction([action], mode="append", schema=table.schema(), partition_by=PARTITION_COLUMNS)
        t2 = time.perf_counter()
        return {"load": t1 - t0, "commit": t2 - t1, "total": t2 - t0,
                "checkpointed": _checkpoints(self.path) != before, "version": table.version()}


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__.split("\n")[0])
    p.add_argument("--versions", type=int, default=None, help="versions before the measured commits (default 1000, quick 200)")
    p.add_argument("--no-transaction", action="store_true", help="skip the Transaction path (needs no Spark then)")
    args = p.parse_args(argv)
    versions = args.versions or (200 if args.quick else 1000)
    reps = args.reps or (10 if args.quick else 30)
    extra = ([f"--versions {versions}"] if args.versions else []) + (["--no-transaction"] if args.no_transaction else [])
    progress = Progress("commit")
    report = Report(
        benchmark="commit", title=f"A small commit on a table with {versions:,} versions",
        command=command_line("bench_commit", args, extra),
        params={"versions": versions, "adds_per_version": 1, "reps": reps, "checkpoint_interval": 10,
                "measured_versions": f"{versions + 1}..{versions + reps}"},
    )
    with workdir("commit", args.workdir, args.keep, progress) as wd:
        base = str(wd / "base")
        factory = FileFactory(seed=7)
        progress(f"building {versions} versions (create + {versions - 1} commits of one add) through skiplake.txn.commit")
        t0 = time.perf_counter()
        writer = LogWriter(base, {"delta.checkpointInterval": "10"})
        build_commits = []
        for _ in range(versions - 1):
            build_commits.append(writer.commit([factory.add()]))
            if writer.version % 250 == 0:
                progress(f"  version {writer.version}")
        progress(f"built versions 0..{writer.version} in {time.perf_counter() - t0:.1f} s")
        report.timing("build", "tiny commit while building (no checkpoint)",
                      [c.seconds for c in build_commits if not c.checkpointed], "skiplake log API, snapshot not reloaded")
        report.timing("build", "tiny commit while building (with checkpoint)",
                      [c.seconds for c in build_commits if c.checkpointed])

        contenders: dict[str, object] = {}
        paths = {}
        for name in (LOG, TXN, DELTA):
            if name == TXN and args.no_transaction:
                continue
            paths[name] = str(wd / name.replace(" ", "_"))
            shutil.copytree(base, paths[name])
        contenders[LOG] = LogApi(paths[LOG])
        contenders[DELTA] = Delta(paths[DELTA])
        if TXN in paths:
            setup_java()
            progress("starting Spark (a Table needs a session; nothing is run on it)")
            import skiplake
            spark = skiplake.local_spark(app_name="bench-commit")
            contenders[TXN] = TransactionPath(spark, paths[TXN])

        results: dict[str, list[dict]] = {k: [] for k in contenders}
        names = [n for n in (LOG, TXN, DELTA) if n in contenders]
        progress("warm-up: one small commit per contender (not timed)")
        warm = factory.add()
        for name in names:
            contenders[name].run(warm)
        progress(f"measuring {reps} small commits per contender ({', '.join(names)})")
        for rep in range(reps):
            add = factory.add()
            for name in rotated(names, rep):
                _, r = timed(lambda: contenders[name].run(add))
                results[name].append(r)
            progress(f"  version {results[LOG][-1]['version']}: " + ", ".join(
                f"{n} {results[n][-1]['load'] * 1000:.1f}+{results[n][-1]['commit'] * 1000:.1f} ms"
                + (" (checkpoint)" if results[n][-1]["checkpointed"] else "") for n in names))
        if TXN in contenders:
            contenders[TXN].close()

        # ---- checks: every contender ended at the same version with the same number of files,
        # and skiplake and delta-rs read each other's tables alike.
        import pyarrow as pa
        from deltalake import DeltaTable

        from skiplake.log.snapshot import Snapshot
        expected_version = versions + reps  # + the warm-up commit
        for name, path in paths.items():
            s = Snapshot.load(path)
            d = DeltaTable(path)
            n_d = pa.table(d.get_add_actions(flatten=True)).num_rows
            report.check(f"{name}: version and files", s.version == d.version() == expected_version
                         and s.num_files == n_d == expected_version,
                         f"skiplake reads v{s.version} with {s.num_files} files, deltalake reads v{d.version()} "
                         f"with {n_d} files (expected v{expected_version}, {expected_version} files)")

    # ---- report
    for name in names:
        rs = results[name]
        load_label = {LOG: "Snapshot.load", TXN: "table.begin() (Snapshot.load)", DELTA: "DeltaTable(path)"}[name]
        commit_label = {LOG: "commit()", TXN: "txn.commit()", DELTA: "create_write_transaction()"}[name]
        report.timing(name, load_label, [r["load"] for r in rs])
        report.timing(name, f"{commit_label}, all", [r["commit"] for r in rs])
        plain = [r["commit"] for r in rs if not r["checkpointed"]]
        cps = [r["commit"] for r in rs if r["checkpointed"]]
        report.timing(name, f"{commit_label}, no checkpoint", plain)
        if cps:
            report.timing(name, f"{commit_label}, with checkpoint", cps)
        if name == TXN:
            report.timing(name, "  of which log commit()", [r["log_commit"] for r in rs])
            report.timing(name, "  of which the rest of txn.commit()", [r["other"] for r in rs],
                          "metrics, Table bookkeeping (and any reload)")
        report.timing(name, "load + commit", [r["total"] for r in rs])

    d_total = median([r["total"] for r in results[DELTA]])
    for name in (LOG, TXN):
        if name not in results:
            continue
        total = median([r["total"] for r in results[name]])
        report.ratio(f"{name} / deltalake, load + commit", total / d_total)
        report.ratio(f"{name} / deltalake, commit only",
                     median([r["commit"] for r in results[name]]) / median([r["commit"] for r in results[DELTA]]))
        worst = max(results[name], key=lambda r: r["total"])
        cp = [r["total"] for r in results[name] if r["checkpointed"]]
        report.headline(f"{name}, load + commit", total, note=f"{total / d_total:.2f}x delta-rs's "
                        f"{d_total * 1000:.1f} ms")
        report.goal(f"{name}: load + commit", total, 0.050,
                    note=f"worst of {reps}: {worst['total'] * 1000:.1f} ms"
                    + (" (a checkpointing commit)" if worst["checkpointed"] else "")
                    + (f"; checkpointing commits (n={len(cp)}): median {median(cp) * 1000:.1f} ms" if cp else ""))
    return finish(report, args)


if __name__ == "__main__":
    sys.exit(main())
