"""Read Delta tables other writers produced with skiplake and with delta-rs, and compare.

    python -m benchmarks.peer_tables DIR [DIR ...] [--delta-spark] [--json] [--out FILE]

Every folder under DIR that holds a `_delta_log` is one table (delta-rs's test tables in
crates/test/tests/data, Delta's golden tables in connectors/golden-tables, or your own). Each is
read at its latest version by skiplake (through Spark) and by delta-rs, and the rows are compared
as sorted lists of normalised values. With --delta-spark, the tables delta-rs cannot read are
compared with delta-spark's answers instead (one subprocess with its own JVM). A table is `same` (equal rows), `different` (both read,
answers differ), `refused` (skiplake raised a typed skiplake error), `crashed` (any other
exception in skiplake), or `reference-fails` (delta-rs could not read it, or it has VARIANT
columns, which only delta-spark's answers are compared with).
"""
from __future__ import annotations

import argparse
import datetime
import decimal
import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from skiplake.errors import SkiplakeError


@dataclass
class Outcome:
    table: str
    status: str
    rows: int | None
    detail: str
    seconds: float


def _norm(value: Any) -> Any:
    """One spelling for a value whichever reader produced it."""
    if value is None:
        return None
    if isinstance(value, float):
        return "nan" if math.isnan(value) else round(value, 9)
    if isinstance(value, decimal.Decimal):
        return format(value.normalize(), "f")
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return value.isoformat()
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, dict):
        return tuple(sorted((str(k), repr(_norm(v))) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):  # Arrow map
            return tuple(sorted((str(k), repr(_norm(v))) for k, v in value))
        return tuple(_norm(v) for v in value)
    return value


def _rows(table: Any, columns: list[str]) -> list[tuple]:
    data = table.select(columns).to_pylist()
    return sorted((tuple(repr(_norm(row[c])) for c in columns) for row in data))


def _reference(table: Any) -> Any:
    """delta-rs's answer: its query engine, which reads column mapping and more features, else
    its dataset reader (which reads some tables the query engine refuses)."""
    import pyarrow as pa
    from deltalake import QueryBuilder
    try:
        return pa.table(QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())
    except Exception:  # noqa: BLE001 - the other path may read it
        return table.to_pyarrow_table()


def tables_under(roots: list[Path]) -> list[Path]:
    found = []
    for root in roots:
        for log in sorted(root.rglob("_delta_log")):
            if log.is_dir() and not any(p.name == "_delta_log" for p in log.parents):
                found.append(log.parent)
    return found


def compare(spark: Any, path: Path) -> Outcome:
    from deltalake import DeltaTable

    from skiplake.table import Table
    started = time.perf_counter()

    def done(status: str, rows: int | None, detail: str) -> Outcome:
        return Outcome(str(path), status, rows, detail[:300], round(time.perf_counter() - started, 2))

    try:
        reference = _reference(DeltaTable(str(path)))
    except Exception as e:  # noqa: BLE001 - any failure of the reference means nothing to compare
        return done("reference-fails", None, f"{type(e).__name__}: {e}".splitlines()[0])
    try:
        df = Table.open(spark, str(path)).read()
        if "variant" in df.schema.simpleString():
            # Arrow has no VARIANT (PySpark cannot convert arrays of them, delta-rs gives raw
            # bytes): such tables are compared with delta-spark, as strings Spark casts.
            return done("reference-fails", None, "VARIANT columns: compared with delta-spark only")
        ours = df.toArrow()
    except SkiplakeError as e:
        return done("refused", None, f"{type(e).__name__}: {e}".splitlines()[0])
    except Exception as e:  # noqa: BLE001 - recorded: the report names it
        return done("crashed", None, f"{type(e).__name__}: {e}".splitlines()[0])
    columns = [c for c in reference.column_names if c in ours.column_names]
    if sorted(columns) != sorted(ours.column_names):
        return done("different", ours.num_rows,
                    f"columns: skiplake {sorted(ours.column_names)} vs delta-rs {sorted(reference.column_names)}")
    try:
        same = _rows(ours, columns) == _rows(reference, columns)
    except Exception as e:  # noqa: BLE001 - values that do not normalise are a difference to look at
        return done("different", ours.num_rows, f"values do not compare: {type(e).__name__}: {e}")
    if not same:
        return done("different", ours.num_rows, f"{ours.num_rows} rows vs {reference.num_rows} from delta-rs")
    return done("same", ours.num_rows, "")


def spark_strings(df: Any) -> list[list[str | None]]:
    """Sorted rows as strings cast by Spark, as testing_support/delta_spark_reader.py spells delta-spark's."""
    from pyspark.sql import functions as F
    rows = df.select(*[F.col(f"`{c}`").cast("string").alias(c) for c in df.columns]).collect()
    return [list(r) for r in sorted((tuple(r) for r in rows), key=lambda t: tuple((v is None, v or "") for v in t))]


def against_delta_spark(spark: Any, outcomes: list[Outcome], package: str) -> None:
    """Compare the tables delta-rs could not read with delta-spark's answers (one subprocess)."""
    import subprocess
    import tempfile

    from skiplake.table import Table
    todo = [o for o in outcomes if o.status == "reference-fails"]
    if not todo:
        return
    reader = Path(__file__).resolve().parent.parent / "testing_support" / "delta_spark_reader.py"
    with tempfile.TemporaryDirectory() as tmp:
        jobs, result = Path(tmp) / "jobs.json", Path(tmp) / "result.json"
        jobs.write_text(json.dumps({"package": package, "jobs": [
            {"id": o.table, "op": "read", "path": o.table} for o in todo]}))
        subprocess.run([sys.executable, str(reader), str(jobs), str(result)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        answers = json.loads(result.read_text())["jobs"]
    for o in todo:
        answer = answers.get(o.table, {})
        if not answer.get("ok"):
            o.detail = f"delta-rs: {o.detail[:120]}; delta-spark: {answer.get('error', '?')[:150]}"
            continue
        try:
            df = Table.open(spark, o.table).read()
            ours = spark_strings(df.select(*answer["columns"]))
        except SkiplakeError as e:
            o.status, o.detail = "refused", f"{type(e).__name__}: {e}".splitlines()[0][:300]
            continue
        except Exception as e:  # noqa: BLE001 - recorded: the report names it
            o.status, o.detail = "crashed", f"{type(e).__name__}: {e}".splitlines()[0][:300]
            continue
        o.rows = len(ours)
        same = ours == answer["rows"]
        o.status = "same" if same else "different"
        o.detail = "reference: delta-spark" + ("" if same else f" ({len(ours)} rows vs {answer['count']})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--delta-spark", metavar="PACKAGE", nargs="?", const="io.delta:delta-spark_4.1_2.13:4.4.0",
                        help="compare the tables delta-rs cannot read with delta-spark's answers "
                             "(Maven coordinate; default %(const)s)")
    args = parser.parse_args(argv)

    import skiplake
    spark = skiplake.local_spark()
    paths = tables_under(args.roots)
    outcomes = []
    for i, path in enumerate(paths, 1):
        outcome = compare(spark, path)
        outcomes.append(outcome)
        if not args.json:
            print(f"[{i}/{len(paths)}] {outcome.status:15} {path}  {outcome.detail}", file=sys.stderr)
    if args.delta_spark:
        against_delta_spark(spark, outcomes, args.delta_spark)
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    report = {"tables": len(outcomes), "counts": counts, "outcomes": [asdict(o) for o in outcomes]}
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"\n{len(outcomes)} tables: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        for o in outcomes:
            if o.status != "same":
                print(f"  {o.status:15} {Path(o.table).name:55} {o.detail[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
