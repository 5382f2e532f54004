"""`make golden`: delta-spark 4.4 writes the golden tables, and what it read back from each.

    python -m tests.golden [--out DIR] [NAME ...]

Each table of tests/interop_tables.GOLDEN_TABLES is written by delta-spark (from Maven Central,
in its own JVM: testing_support/delta_spark.py) at DIR/NAME/table, and DIR/NAME/expected.json
records what delta-spark read from it: the rows (every value cast to a string by Spark, in UTC),
the schema, DESCRIBE DETAIL, DESCRIBE HISTORY's operations, older versions' rows and the table's
other queries (its change feed, its row ids). DIR is tests/data/golden, committed; the gate reads
it without starting delta-spark (tests/test_golden_tables.py). The slow tier writes the same
tables live into a temporary folder with `generate` and checks them the same way.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from tests.interop_tables import GOLDEN, GOLDEN_TABLES, GoldenTable, sort_rows

GOLDEN_DIR = Path(__file__).resolve().parent / "data" / "golden"
# DESCRIBE DETAIL's fields a copy of the table cannot keep: where it is and file times.
UNSTABLE_DETAIL = ("location", "lastModified")


def jobs_for(table: GoldenTable, path: str) -> list[dict]:
    """delta-spark's jobs: the statements, then every read that expected.json records."""
    name = table.name
    jobs = [{"id": f"{name}:{i}", "op": "sql", "sql": sql} for i, sql in enumerate(table.sql(path))]
    jobs.append({"id": f"{name}:read", "op": "read", "path": path, "columns": list(table.columns)})
    jobs.append({"id": f"{name}:detail", "op": "detail", "path": path})
    # An older version is read whole: its columns may be others (renamed, dropped, widened).
    jobs += [{"id": f"{name}@{v}", "op": "read", "path": path, "version": v} for v in table.versions]
    jobs += [{"id": f"{name}?{q}", "op": "sql", "sql": table.query(q, path)} for q, _ in table.queries]
    return jobs


def _ok(job: dict, what: str) -> dict:
    if not job["ok"]:
        raise RuntimeError(f"delta-spark failed on {what}: {job.get('error_class')}: {job.get('error')}")
    return job


def record(table: GoldenTable, result: dict) -> dict:
    """expected.json of one table from delta-spark's results."""
    jobs, name = result["jobs"], table.name
    for i in range(len(table.statements)):
        _ok(jobs[f"{name}:{i}"], f"{name}'s statement {i + 1}")
    read = _ok(jobs[f"{name}:read"], f"reading {name}")
    detail = _ok(jobs[f"{name}:detail"], f"DESCRIBE DETAIL of {name}")["detail"]
    return {
        "table": name,
        "covers": table.covers,
        "written_by": {"delta": result.get("delta_version"), "spark": result.get("spark_version")},
        "statements": list(table.statements),
        "columns": list(table.columns),
        "rows": read["rows"],
        "schema": read["schema"],
        "version": read["version"],
        "history": [{"version": h["version"], "operation": h["operation"]} for h in read["history"]],
        "detail": {k: v for k, v in detail.items() if k not in UNSTABLE_DETAIL},
        "versions": {str(v): _version(jobs[f"{name}@{v}"], f"{name} at version {v}") for v in table.versions},
        "queries": {q: [list(r) for r in sort_rows(_ok(jobs[f"{name}?{q}"], f"{name}'s query {q}")["rows"])]
                    for q, _ in table.queries},
    }


def _version(job: dict, what: str) -> dict:
    read = _ok(job, what)
    return {"columns": read["columns"], "rows": read["rows"]}


def generate(out: Path, tables: list[GoldenTable], delta) -> dict[str, dict]:
    """Write `tables` with delta-spark (a testing_support.delta_spark.DeltaSpark) under `out`,
    replacing what was there, and their expected.json; returns the records by table name."""
    jobs = []
    for table in tables:
        folder = out / table.name
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        jobs += jobs_for(table, str(folder / "table"))
    result = delta.run_batch(jobs)
    records = {}
    for table in tables:
        records[table.name] = record(table, result)
        _drop_checksums(out / table.name / "table")
        path = out / table.name / "expected.json"
        path.write_text(json.dumps(records[table.name], indent=1, ensure_ascii=False, sort_keys=True) + "\n")
    return records


def _drop_checksums(table: Path) -> None:
    """Hadoop's local file system leaves a hidden .crc beside each file it writes; no reader needs
    them, and they would double the files committed."""
    for crc in table.rglob(".*.crc"):
        crc.unlink()


def load(name: str, root: Path = GOLDEN_DIR) -> dict:
    """A golden table's expected.json."""
    return json.loads((root / name / "expected.json").read_text())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=GOLDEN_DIR, help="where the tables go (default: %(default)s)")
    parser.add_argument("names", nargs="*", help=f"only these tables, of: {', '.join(sorted(GOLDEN))}")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(GOLDEN))
    if unknown:
        parser.error(f"no golden table named {', '.join(unknown)}")
    from testing_support.delta_spark import DeltaSpark
    from testing_support.paths import setup_java
    setup_java(install=True)
    tables = [GOLDEN[n] for n in args.names] if args.names else list(GOLDEN_TABLES)
    with tempfile.TemporaryDirectory(prefix="golden-") as work:
        delta = DeltaSpark(Path(work))
        try:
            records = generate(args.out, tables, delta)
        finally:
            delta.close()
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    for name, rec in records.items():
        print(f"{name:18} version {rec['version']:>3}  {len(rec['rows']):>5} rows  {rec['covers']}")
    print(f"{len(records)} tables by delta-spark {next(iter(records.values()))['written_by']['delta']} "
          f"under {args.out}: {size / 1e6:.1f} MB in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
