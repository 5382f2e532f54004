"""The `skiplake` command line: describe, history, explain, optimize, vacuum, demo.

describe, history, explain and vacuum read the Delta log directly and never start Spark, so they
answer in well under a second; optimize and demo start a local SparkSession (pyspark is imported
only by those two). Every command takes --json and then prints exactly one JSON document on
stdout. A SkiplakeError (or an OS error about the path) is printed as one line on stderr and the
exit status is 2.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sys
from typing import Any, Callable, Sequence

from skiplake import __version__
from skiplake.errors import SkiplakeError

EXIT_OK = 0
EXIT_ERROR = 2


# ---------------------------------------------------------------- helpers


def iso_ms(ms: int | None) -> str | None:
    """Milliseconds since the epoch as an ISO-8601 UTC timestamp (None stays None)."""
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def _console(stderr: bool = False):
    from rich.console import Console
    # Wide enough that paths and predicates are not folded when stdout is a pipe or a file.
    width = None if (sys.stderr if stderr else sys.stdout).isatty() else 160
    return Console(stderr=stderr, width=width, highlight=False, soft_wrap=False)


def _print_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, default=_json_default) + "\n")
    sys.stdout.flush()


def _json_default(o: Any) -> Any:
    import decimal
    if isinstance(o, decimal.Decimal):
        return float(o)
    if isinstance(o, (dt.date, dt.datetime)):
        return o.isoformat()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return str(o)


def _esc(text: Any) -> str:
    from rich.markup import escape
    return escape(str(text))


def _table_path(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def _decode_param(value: Any) -> Any:
    """operationParameters values are JSON-encoded strings in Delta logs; decode them when they are."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------- describe


def describe_table(path: str) -> dict[str, Any]:
    """Everything `skiplake describe` shows, from the log alone (no Spark)."""
    from skiplake.log.commit import isolation_level
    from skiplake.log.schema import type_name
    from skiplake.log.snapshot import Snapshot

    snap = Snapshot.load(path)
    md = snap.metadata
    rows: int | None = 0
    files_without_stats = 0
    for stats in snap.files.column("stats").to_pylist():
        n = None
        if stats:
            try:
                n = json.loads(stats).get("numRecords")
            except ValueError:
                n = None
        if n is None:
            files_without_stats += 1
        else:
            rows = (rows or 0) + int(n)
    if files_without_stats:
        rows = None  # unknown: some files carry no row count
    proto = snap.protocol
    return {
        "path": snap.table_path,
        "name": md.name or os.path.basename(snap.table_path.rstrip(os.sep)),
        "description": md.description,
        "id": md.id,
        "version": snap.version,
        "format": md.format.provider,
        "schema": [{"name": f.name, "type": type_name(f.type), "nullable": f.nullable}
                   for f in md.schema.fields],
        "partition_columns": list(md.partitionColumns),
        "bucketing": _bucketing(dict(md.configuration)),
        "properties": dict(md.configuration),
        "isolation_level": isolation_level(dict(md.configuration)),
        "num_files": snap.num_files,
        "total_bytes": snap.size_bytes,
        "total_rows": rows,
        "files_without_stats": files_without_stats,
        "protocol": {
            "minReaderVersion": proto.minReaderVersion,
            "minWriterVersion": proto.minWriterVersion,
            "readerFeatures": list(proto.readerFeatures) if proto.readerFeatures is not None else None,
            "writerFeatures": list(proto.writerFeatures) if proto.writerFeatures is not None else None,
        },
        "created_time": iso_ms(md.createdTime),
        "last_commit_time": iso_ms(snap.timestamp or None),
    }


def _bucketing(configuration: dict[str, str]) -> dict[str, Any] | None:
    from skiplake.layout.bucket_spec import bucket_spec_of
    spec = bucket_spec_of(configuration)
    if spec is None:
        return None
    return {"num_buckets": spec.num_buckets, "columns": list(spec.columns), "sort_by": list(spec.sort_by)}


def _cmd_describe(args: argparse.Namespace) -> int:
    info = describe_table(_table_path(args.path))
    if args.json:
        _print_json(info)
        return EXIT_OK
    from rich.table import Table as RichTable

    con = _console()
    overview = RichTable(title=f"skiplake table {_esc(info['name'])}", show_header=False, title_justify="left")
    overview.add_column(style="bold")
    overview.add_column(overflow="fold")
    proto = info["protocol"]
    proto_text = f"reader {proto['minReaderVersion']}, writer {proto['minWriterVersion']}"
    features = sorted(set((proto["readerFeatures"] or []) + (proto["writerFeatures"] or [])))
    if features:
        proto_text += f" (features: {', '.join(features)})"
    rows = "unknown" if info["total_rows"] is None else f"{info['total_rows']:,}"
    if info["files_without_stats"]:
        rows += f" ({info['files_without_stats']} files have no stats)"
    for key, value in [
        ("path", info["path"]),
        ("description", info["description"]),
        ("version", info["version"]),
        ("last commit", info["last_commit_time"]),
        ("created", info["created_time"]),
        ("partition columns", ", ".join(info["partition_columns"]) or "(none)"),
        ("bucketing", "(none)" if not info["bucketing"] else
         f"{info['bucketing']['num_buckets']} buckets by {', '.join(info['bucketing']['columns'])}"
         + (f", sorted by {', '.join(info['bucketing']['sort_by'])}" if info["bucketing"]["sort_by"] else "")),
        ("isolation level", info["isolation_level"]),
        ("files", f"{info['num_files']:,}"),
        ("size", f"{human_bytes(info['total_bytes'])} ({info['total_bytes']:,} bytes)"),
        ("rows", rows),
        ("protocol", proto_text),
        ("table id", info["id"]),
    ]:
        if value is not None:
            overview.add_row(key, _esc(value))
    con.print(overview)

    schema = RichTable(title="schema", title_justify="left")
    schema.add_column("#", justify="right")
    schema.add_column("column")
    schema.add_column("type")
    schema.add_column("nullable")
    schema.add_column("partition")
    parts = {p.lower() for p in info["partition_columns"]}
    for i, f in enumerate(info["schema"], start=1):
        schema.add_row(str(i), _esc(f["name"]), _esc(f["type"]), "yes" if f["nullable"] else "no",
                       "yes" if f["name"].lower() in parts else "")
    con.print(schema)

    if info["properties"]:
        props = RichTable(title="properties", title_justify="left")
        props.add_column("key")
        props.add_column("value", overflow="fold")
        for k, v in sorted(info["properties"].items()):
            props.add_row(_esc(k), _esc(v))
        con.print(props)
    return EXIT_OK


# ---------------------------------------------------------------- history


def table_history(path: str, limit: int | None = None) -> list[dict[str, Any]]:
    """One entry per version still in the log, newest first (no Spark)."""
    from skiplake.errors import NotATableError
    from skiplake.log.actions import CommitInfo
    from skiplake.log.snapshot import list_log, log_storage, read_commit

    storage = log_storage(path)
    listing = list_log(storage)
    if listing.latest is None:
        raise NotATableError(path)
    versions = sorted(listing.commits, reverse=True)
    if limit is not None:
        versions = versions[:limit]
    out = []
    for v in versions:
        info: CommitInfo | None = None
        for action in read_commit(storage, v):
            if isinstance(action, CommitInfo):
                info = action
        ts = (info.timestamp if info and info.timestamp else None) or listing.commits[v].mtime_ms
        metrics = dict(info.operationMetrics or {}) if info else {}
        out.append({
            "version": v,
            "timestamp": iso_ms(ts),
            "operation": info.operation if info else None,
            "parameters": {k: _decode_param(val) for k, val in (info.operationParameters or {}).items()}
            if info else {},
            "readVersion": info.readVersion if info else None,
            "isBlindAppend": info.isBlindAppend if info else None,
            "isolationLevel": info.isolationLevel if info else None,
            "engineInfo": info.engineInfo if info else None,
            "metrics": metrics,
            "files_added": _int_or_none(metrics.get("numAddedFiles")),
            "files_removed": _int_or_none(metrics.get("numRemovedFiles")),
            "rows_written": _int_or_none(metrics.get("numOutputRows")),
            "rows_deleted": _int_or_none(metrics.get("numDeletedRows")),
        })
    return out


def _params_text(params: dict[str, Any]) -> str:
    parts = []
    for k, v in params.items():
        if v in (None, [], {}, ""):
            continue
        if isinstance(v, list) and len(v) == 1:
            v = v[0]
        parts.append(f"{k}={v if isinstance(v, str) else json.dumps(v)}")
    return ", ".join(parts)


def _metrics_text(entry: dict[str, Any]) -> str:
    parts = []
    if entry["files_added"] or entry["files_removed"]:
        parts.append(f"+{entry['files_added'] or 0}/-{entry['files_removed'] or 0} files")
    if entry["rows_written"]:
        parts.append(f"{entry['rows_written']:,} rows out")
    if entry["rows_deleted"]:
        parts.append(f"{entry['rows_deleted']:,} deleted")
    return ", ".join(parts)


def _cmd_history(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        from skiplake.errors import InvalidArgumentError
        raise InvalidArgumentError(f"--limit must be at least 1, not {args.limit}")
    path = _table_path(args.path)
    entries = table_history(path, args.limit)
    if args.json:
        _print_json({"path": path, "history": entries})
        return EXIT_OK
    from rich.table import Table as RichTable
    con = _console()
    t = RichTable(title=f"history of {_esc(os.path.basename(path))} ({_esc(path)})", title_justify="left")
    t.add_column("version", justify="right")
    t.add_column("timestamp (UTC)", no_wrap=True)
    t.add_column("operation", no_wrap=True)
    t.add_column("parameters", overflow="fold")
    t.add_column("blind")
    t.add_column("isolation")
    t.add_column("metrics", overflow="fold")
    for e in entries:
        blind = {True: "yes", False: "no", None: "-"}[e["isBlindAppend"]]
        ts = (e["timestamp"] or "-").replace("T", " ").replace("+00:00", "")[:19]
        t.add_row(str(e["version"]), ts, _esc(e["operation"] or "-"), _esc(_params_text(e["parameters"])),
                  blind, _esc(e["isolationLevel"] or "-"), _esc(_metrics_text(e)))
    con.print(t)
    return EXIT_OK


# ---------------------------------------------------------------- explain


def explain_scan(path: str, where: str | None, version: int | None = None) -> dict[str, Any]:
    from skiplake.log.snapshot import Snapshot
    from skiplake.skipping.plan import plan_scan
    report = plan_scan(Snapshot.load(path, version), where).report
    doc = report.to_dict()
    doc["files_skipped"] = report.files_skipped
    doc["text"] = report.text()
    return doc


def _cmd_explain(args: argparse.Namespace) -> int:
    doc = explain_scan(_table_path(args.path), args.where, args.version)
    if args.json:
        _print_json(doc)
        return EXIT_OK
    text = doc["text"]
    if doc.get("rows_selected") is not None and doc.get("rows_total") is not None:
        text += f"\n  SelectedRowsUpperBound: {doc['rows_selected']:,} out of {doc['rows_total']:,}"
    sys.stdout.write(text + "\n")
    return EXIT_OK


# ---------------------------------------------------------------- optimize / vacuum


def _spark_session(app_name: str):
    """(session, started_here): the active session when main() runs inside a Spark program, else a new one."""
    from pyspark.sql import SparkSession
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    import skiplake
    return skiplake.local_spark(app_name=app_name), True


def _cmd_catalog(args: argparse.Namespace) -> int:
    if args.catalog_command == "sync":
        from skiplake.catalog.client import catalog_client
        from skiplake.catalog.sync import sync_partitions
        result = sync_partitions(catalog_client(args.db), args.database, args.table)
        if args.json:
            print(json.dumps(result.to_dict()))
        else:
            print(f"{args.database}.{args.table}: {result.found} partition folders, {result.registered} registered, "
                  f"{result.existing} already in the catalog, {len(result.errors)} refused")
            for e in result.errors[:20]:
                print(f"  {e['PartitionValues']}: {e['ErrorDetail']['ErrorCode']}: {e['ErrorDetail']['ErrorMessage']}")
        return EXIT_OK if not result.errors else EXIT_ERROR
    if args.catalog_command != "serve":
        sys.stderr.write("skiplake catalog: name a command: serve, sync\n")
        return EXIT_ERROR
    from skiplake.catalog.server import CatalogServer
    from skiplake.catalog.service import GlueCatalog
    server = CatalogServer(GlueCatalog(args.db), args.host, args.port)
    sys.stderr.write(f"skiplake catalog: serving AWS Glue's API for {args.db} on {server.endpoint}\n")
    sys.stderr.flush()
    try:
        server.serve_forever()
    finally:
        server.stop()
    return EXIT_OK


def _cmd_optimize(args: argparse.Namespace) -> int:
    import time

    from skiplake.log.snapshot import Snapshot
    path = _table_path(args.path)
    before = Snapshot.load(path)  # fail fast, before starting a JVM, when the path is not a table
    if args.target_file_size is not None and args.target_file_size <= 0:
        from skiplake.errors import InvalidArgumentError
        raise InvalidArgumentError(
            f"--target-file-size must be a positive number of bytes, not {args.target_file_size}")
    if args.where:
        from skiplake.expr.parse import bind
        bind(args.where, before.schema)
    import skiplake
    started = time.perf_counter()
    spark, own = _spark_session("skiplake-optimize")
    try:
        table = skiplake.Table.open(spark, path)
        kwargs = {} if args.target_file_size is None else {"target_file_size": args.target_file_size}
        zorder = [c.strip() for c in args.zorder_by.split(",") if c.strip()] if args.zorder_by is not None else None
        result = table.optimize(where=args.where, zorder_by=zorder, **kwargs,
                                progress=lambda line: print(f"optimize: {line}", file=sys.stderr, flush=True))
    finally:
        if own:
            spark.stop()
    after = Snapshot.load(path)
    doc = {"path": path, **result.to_dict(), "files_before": before.num_files, "files_after": after.num_files,
           "seconds": round(time.perf_counter() - started, 3)}
    if args.json:
        _print_json(doc)
        return EXIT_OK
    con = _console()
    if result.version is None:
        con.print(f"OPTIMIZE {_esc(path)}: nothing to compact ({before.num_files} files, "
                  "no partition has 2 or more small files)")
    else:
        con.print(f"OPTIMIZE {_esc(path)} committed version {result.version}: "
                  f"{result.files_removed} files ({human_bytes(result.bytes_removed)}) compacted into "
                  f"{result.files_added} ({human_bytes(result.bytes_added)}) in "
                  f"{result.partitions_optimized} partition(s); the table now has {after.num_files} files "
                  f"(was {before.num_files}), {doc['seconds']:.1f}s")
    return EXIT_OK


def _cmd_vacuum(args: argparse.Namespace) -> int:
    from skiplake.vacuum import vacuum
    path = _table_path(args.path)
    from skiplake.log.snapshot import Snapshot
    Snapshot.load(path)  # a clear NotATableError rather than walking an arbitrary folder
    result = vacuum(path, args.retention_hours, dry_run=args.dry_run, force=args.force)
    doc = {"path": path, "retention_hours": args.retention_hours, **result.to_dict()}
    if args.json:
        _print_json(doc)
        return EXIT_OK
    con = _console()
    verb = "would delete" if result.dry_run else "deleted"
    con.print(f"VACUUM {_esc(path)} (retention {args.retention_hours:g} h{', dry run' if result.dry_run else ''}): "
              f"{verb} {result.files_deleted} files, {human_bytes(result.bytes_deleted)}")
    for f in result.files[:50]:
        con.print(f"  {_esc(f)}")
    if len(result.files) > 50:
        con.print(f"  ... and {len(result.files) - 50} more (use --json for the full list)")
    return EXIT_OK


# ---------------------------------------------------------------- demo


def _cmd_demo(args: argparse.Namespace) -> int:
    from skiplake import demo
    from skiplake.tpcds import _check_args
    _check_args(args.sf, demo.TABLES)  # a bad --sf fails before pyspark is imported
    spark = None
    if "pyspark" in sys.modules:  # main() called inside a Spark program: reuse its session
        from pyspark.sql import SparkSession
        spark = SparkSession.getActiveSession()
    demo.run(sf=args.sf, warehouse=args.warehouse, data_dir=args.data, as_json=args.json, spark=spark)
    return EXIT_OK


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="skiplake",
        description="skiplake: Delta-protocol lakehouse tables for PySpark that read less data.")
    parser.add_argument("--version", action="version", version=f"skiplake {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, func: Callable[[argparse.Namespace], int], help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(func=func)
        return p

    p = add("describe", _cmd_describe, "schema, partitioning, properties, size and protocol of a table")
    p.add_argument("path", metavar="PATH", help="the table's folder")
    p.add_argument("--json", action="store_true", help="print one JSON document")

    p = add("history", _cmd_history, "the commits of a table, newest first")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="only the N newest versions")
    p.add_argument("--json", action="store_true")

    p = add("explain", _cmd_explain, "which files a predicate reads (partition and min/max pruning)")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--where", required=True, metavar="SQL", help='a SQL condition, e.g. "ss_item_sk IN (40, 41)"')
    p.add_argument("--version", type=int, default=None, metavar="V", help="plan against version V (time travel)")
    p.add_argument("--json", action="store_true")

    p = add("optimize", _cmd_optimize, "compact small files, or Z-order them (starts Spark)")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--where", default=None, metavar="SQL", help="only partitions matching this condition")
    p.add_argument("--zorder-by", default=None, metavar="COL,COL",
                   help="cluster the files by these columns (OPTIMIZE ... ZORDER BY)")
    p.add_argument("--target-file-size", type=int, default=None, metavar="BYTES",
                   help="target size of the compacted files (default 128 MiB)")
    p.add_argument("--json", action="store_true")

    p = add("vacuum", _cmd_vacuum, "delete data files the table no longer references")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--retention-hours", type=float, default=168.0, metavar="H",
                   help="keep unreferenced files younger than H hours (default 168)")
    p.add_argument("--dry-run", action="store_true", help="list the files without deleting them")
    p.add_argument("--force", action="store_true",
                   help="allow a retention shorter than the table's minimum (only when nothing else runs)")
    p.add_argument("--json", action="store_true")

    p = add("demo", _cmd_demo, "TPC-DS through skiplake tables: generate, load, query, maintain (starts Spark)")
    p.add_argument("--sf", type=float, default=0.1, help="TPC-DS scale factor (default 0.1)")
    p.add_argument("--warehouse", default="warehouse", metavar="DIR",
                   help="where the tables go (default ./warehouse); the demo's three tables there are recreated")
    p.add_argument("--data", default="demo-data", metavar="DIR",
                   help="where the generated Parquet goes, reused across runs (default ./demo-data)")
    p.add_argument("--json", action="store_true", help="progress on stderr, one JSON summary on stdout")
    p = add("catalog", _cmd_catalog, "the Glue-compatible catalog")
    catalog_sub = p.add_subparsers(dest="catalog_command", metavar="CATALOG_COMMAND")
    serve = catalog_sub.add_parser("serve", help="serve AWS Glue's JSON API (boto3's Glue client talks to it)",
                                   description="serve AWS Glue's JSON API (boto3's Glue client talks to it)")
    serve.add_argument("--db", default="sqlite:///catalog.db", metavar="URL",
                       help="SQLAlchemy URL: sqlite:///FILE (default %(default)s) or postgresql+psycopg://...")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=9700)
    sync = catalog_sub.add_parser("sync", help="register the partition folders found under a table's location "
                                  "(like MSCK REPAIR TABLE)",
                                  description="register the partition folders found under a table's location "
                                  "(like MSCK REPAIR TABLE)")
    sync.add_argument("--db", default="sqlite:///catalog.db", metavar="URL",
                      help="database URL, or http(s):// endpoint of a Glue-compatible server")
    sync.add_argument("--database", required=True)
    sync.add_argument("--table", required=True)
    sync.add_argument("--json", action="store_true")

    return parser


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _one_line(text: object) -> str:
    """A message on one line, without terminal escapes (sqlglot underlines the bad token)."""
    return " ".join(_ANSI.sub("", str(text)).split())


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, usage errors (argparse already printed them)
        return e.code if isinstance(e.code, int) else (EXIT_OK if e.code is None else EXIT_ERROR)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    try:
        return args.func(args)
    except SkiplakeError as e:
        sys.stderr.write(f"skiplake {args.command}: error: {_one_line(e)}\n")
        return EXIT_ERROR
    except (FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError) as e:
        sys.stderr.write(f"skiplake {args.command}: error: {_one_line(e)}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        sys.stderr.write(f"skiplake {args.command}: interrupted\n")
        return 130
    except BrokenPipeError:  # `skiplake history T | head`
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
