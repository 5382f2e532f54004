"""The `skiplake` command line: describe, history, explain, optimize, vacuum, restore, convert, demo, catalog.

describe, history, explain --where, vacuum and restore read the Delta log directly and never start Spark,
so they answer in well under a second; optimize, convert, demo and explain --sql start a local SparkSession
(pyspark is imported only by those). Every command but `catalog serve` takes --json and then prints exactly
one JSON document on stdout. A SkiplakeError (or an OS error about the path) is printed as one line on
stderr and the exit status is 2.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from typing import Callable, Sequence

from skiplake.console import console, esc, human_bytes, metrics_text, one_line, params_text, print_json
from skiplake.errors import InvalidArgumentError, SkiplakeError
from skiplake.extras import require
from skiplake.layout.bucket_spec import BucketSpec
from skiplake.table_info import describe_table, explain_scan, table_history
from skiplake.version import __version__

EXIT_OK = 0
EXIT_ERROR = 2


def _table_path(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


# ---------------------------------------------------------------- describe


def _cmd_describe(args: argparse.Namespace) -> int:
    info = describe_table(_table_path(args.path))
    if args.json:
        print_json(info)
        return EXIT_OK
    from rich.table import Table as RichTable

    con = console()
    overview = RichTable(title=f"skiplake table {esc(info['name'])}", show_header=False, title_justify="left")
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
            overview.add_row(key, esc(value))
    con.print(overview)

    schema = RichTable(title="schema", title_justify="left")
    schema.add_column("#", justify="right")
    schema.add_column("column")
    schema.add_column("type")
    schema.add_column("nullable")
    schema.add_column("partition")
    parts = {p.lower() for p in info["partition_columns"]}
    for i, f in enumerate(info["schema"], start=1):
        schema.add_row(str(i), esc(f["name"]), esc(f["type"]), "yes" if f["nullable"] else "no",
                       "yes" if f["name"].lower() in parts else "")
    con.print(schema)

    if info["properties"]:
        props = RichTable(title="properties", title_justify="left")
        props.add_column("key")
        props.add_column("value", overflow="fold")
        for k, v in sorted(info["properties"].items()):
            props.add_row(esc(k), esc(v))
        con.print(props)
    return EXIT_OK


# ---------------------------------------------------------------- history


def _cmd_history(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        raise InvalidArgumentError(f"--limit must be at least 1, not {args.limit}")
    path = _table_path(args.path)
    entries = table_history(path, args.limit)
    if args.json:
        print_json({"path": path, "history": entries})
        return EXIT_OK
    from rich.table import Table as RichTable
    con = console()
    t = RichTable(title=f"history of {esc(os.path.basename(path))} ({esc(path)})", title_justify="left")
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
        t.add_row(str(e["version"]), ts, esc(e["operation"] or "-"), esc(params_text(e["parameters"])),
                  blind, esc(e["isolationLevel"] or "-"), esc(metrics_text(e)))
    con.print(t)
    return EXIT_OK


# ---------------------------------------------------------------- explain


def _cmd_explain(args: argparse.Namespace) -> int:
    if (args.where is None) == (args.sql is None):
        raise InvalidArgumentError("give --where SQL (a table's scan) or --sql QUERY (a query over a lake root)")
    if args.sql is not None:
        return _explain_query(args)
    doc = explain_scan(_table_path(args.path), args.where, args.version)
    if args.json:
        print_json(doc)
        return EXIT_OK
    text = doc["text"]
    if doc.get("rows_selected") is not None and doc.get("rows_total") is not None:
        text += f"\n  SelectedRowsUpperBound: {doc['rows_selected']:,} out of {doc['rows_total']:,}"
    sys.stdout.write(text + "\n")
    return EXIT_OK


def _explain_query(args: argparse.Namespace) -> int:
    """lake.explain of a SQL query over the tables under a root (starts Spark: the build sides of
    dynamic file pruning run to know their keys, and are timed)."""
    if args.version is not None:
        raise InvalidArgumentError("--version applies to --where (one table's scan), not to --sql")
    root = _table_path(args.path)
    if not os.path.isdir(root):
        raise InvalidArgumentError(f"{root} is not a folder: --sql needs a lake root (a folder of tables)")
    import skiplake
    from skiplake.spark.session.session_setup import active_or_local_spark
    spark, own = active_or_local_spark("skiplake-explain")
    try:
        explained = skiplake.Lake(spark, root).explain(args.sql)
    finally:
        if own:
            spark.stop()
    if args.json:
        print_json(explained.to_dict())
    else:
        sys.stdout.write(explained.text() + "\n")
    return EXIT_OK


# ---------------------------------------------------------------- optimize / vacuum


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
    require("catalog", "skiplake catalog serve")
    from skiplake.catalog.app import Limits
    from skiplake.catalog.server import ServeOptions, serve
    options = ServeOptions(
        db=args.db, host=args.host, port=args.port, credentials=args.credentials, workers=args.workers,
        tls_cert=args.tls_cert, tls_key=args.tls_key, access_log=None if args.access_log == "off" else args.access_log,
        graceful_timeout=args.graceful_timeout, keep_alive=args.keep_alive, max_connections=args.max_connections,
        limits=Limits(max_body_bytes=args.max_request_bytes, body_timeout=args.body_timeout,
                      request_timeout=args.request_timeout, threads=args.threads))
    options.check()
    checked = "SigV4 required" if args.credentials else "requests not signature-checked"
    sys.stderr.write(f"skiplake catalog: serving AWS Glue's API for {args.db} on {options.scheme}://{args.host}:"
                     f"{args.port} ({args.workers} worker{'s' if args.workers > 1 else ''}, {checked})\n")
    sys.stderr.flush()
    serve(options)
    return EXIT_OK


def _cmd_optimize(args: argparse.Namespace) -> int:
    import time

    from skiplake.log.snapshot import Snapshot
    path = _table_path(args.path)
    before = Snapshot.load(path)  # fail fast, before starting a JVM, when the path is not a table
    if args.target_file_size is not None and args.target_file_size <= 0:
        raise InvalidArgumentError(
            f"--target-file-size must be a positive number of bytes, not {args.target_file_size}")
    if args.where:
        from skiplake.expr.parse import bind
        bind(args.where, before.schema)
    import skiplake
    started = time.perf_counter()
    from skiplake.spark.session.session_setup import active_or_local_spark
    spark, own = active_or_local_spark("skiplake-optimize")
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
        print_json(doc)
        return EXIT_OK
    con = console()
    if result.version is None:
        con.print(f"OPTIMIZE {esc(path)}: nothing to compact ({before.num_files} files, "
                  "no partition has 2 or more small files)")
    else:
        con.print(f"OPTIMIZE {esc(path)} committed version {result.version}: "
                  f"{result.files_removed} files ({human_bytes(result.bytes_removed)}) compacted into "
                  f"{result.files_added} ({human_bytes(result.bytes_added)}) in "
                  f"{result.partitions_optimized} partition(s); the table now has {after.num_files} files "
                  f"(was {before.num_files}), {doc['seconds']:.1f}s")
    return EXIT_OK


def _cmd_vacuum(args: argparse.Namespace) -> int:
    from skiplake.log.vacuum import vacuum
    path = _table_path(args.path)
    from skiplake.log.snapshot import Snapshot
    Snapshot.load(path)  # a clear NotATableError rather than walking an arbitrary folder
    result = vacuum(path, args.retention_hours, dry_run=args.dry_run, force=args.force)
    doc = {"path": path, "retention_hours": args.retention_hours, **result.to_dict()}
    if args.json:
        print_json(doc)
        return EXIT_OK
    con = console()
    verb = "would delete" if result.dry_run else "deleted"
    con.print(f"VACUUM {esc(path)} (retention {args.retention_hours:g} h{', dry run' if result.dry_run else ''}): "
              f"{verb} {result.files_deleted} files, {human_bytes(result.bytes_deleted)}")
    for f in result.files[:50]:
        con.print(f"  {esc(f)}")
    if len(result.files) > 50:
        con.print(f"  ... and {len(result.files) - 50} more (use --json for the full list)")
    return EXIT_OK


# ---------------------------------------------------------------- restore


def _cmd_restore(args: argparse.Namespace) -> int:
    from skiplake.txn.restore import restore
    path = _table_path(args.path)
    result = restore(path, args.to_version, args.to_timestamp)
    doc = {"path": path, **asdict(result)}
    if args.json:
        print_json(doc)
        return EXIT_OK
    console().print(
        f"RESTORE {esc(path)} to version {result.restored_version}: committed version {result.version}; "
        f"{result.num_restored_files} files restored ({human_bytes(result.restored_files_size)}), "
        f"{result.num_removed_files} removed ({human_bytes(result.removed_files_size)}); now "
        f"{result.num_of_files_after_restore} files, {human_bytes(result.table_size_after_restore)}")
    return EXIT_OK


# ---------------------------------------------------------------- convert


def _bucket_spec(args: argparse.Namespace) -> BucketSpec | None:
    if args.bucket_by is None and args.num_buckets is None:
        if args.sort_by is not None:
            raise InvalidArgumentError("--sort-by applies to a bucketed conversion: give --bucket-by and --num-buckets")
        return None
    if args.bucket_by is None or args.num_buckets is None:
        raise InvalidArgumentError("a bucketed conversion needs both --bucket-by COLS and --num-buckets N")

    def names(text: str | None) -> list[str]:
        return [c.strip() for c in (text or "").split(",") if c.strip()]
    return BucketSpec(args.num_buckets, names(args.bucket_by), names(args.sort_by))


def _properties(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise InvalidArgumentError(f"--property takes KEY=VALUE, not {item!r}")
        out[key.strip()] = value.strip()
    return out


def _cmd_convert(args: argparse.Namespace) -> int:
    path = _table_path(args.path)
    if not os.path.isdir(path):  # before a JVM starts
        raise InvalidArgumentError(f"{path} is not a directory: give the folder of Parquet files to convert")
    spec = _bucket_spec(args)
    properties = _properties(args.property)
    from skiplake.spark.convert.in_place import convert
    from skiplake.spark.session.session_setup import active_or_local_spark, ensure_conf
    spark, own = active_or_local_spark("skiplake-convert")
    try:
        ensure_conf(spark)
        progress = None if args.json else (lambda line: print(f"convert: {line}", file=sys.stderr, flush=True))
        done = convert(spark, path, partition_by=args.partition_by, bucket_by=spec,
                       properties=properties, merge_schema=args.merge_schema,
                       verify_buckets=not args.no_verify_buckets, footer_job_threshold=args.footer_job_threshold,
                       progress=progress)
    finally:
        if own:
            spark.stop()
    if args.json:
        print_json(done.report.to_dict())
    else:
        console().print(esc(done.report.text()))
    return EXIT_OK


# ---------------------------------------------------------------- sql


SQL_ROWS_SHOWN = 1000


def _cmd_sql(args: argparse.Namespace) -> int:
    if (args.execute is None) == (args.file is None):
        raise InvalidArgumentError("give the statements with -e STATEMENT or -f FILE (one of the two)")
    if args.file is not None:
        with open(args.file, encoding="utf-8") as f:
            script = f.read()
    else:
        script = args.execute
    from skiplake.lake import Lake
    from skiplake.spark.session.session_setup import active_or_local_spark
    from skiplake.statements.tokens import split_script
    statements = split_script(script)  # a script that cannot be cut fails before a JVM starts
    spark, own = active_or_local_spark("skiplake-sql")
    out: list[dict] = []
    try:
        lake = Lake(spark, args.root)
        for part, df in zip(statements, lake.sql_script(script)):
            found = df.limit(SQL_ROWS_SHOWN + 1).collect()
            out.append({"statement": part.text, "columns": list(df.columns),
                        "rows": [[_plain(v) for v in r] for r in found[:SQL_ROWS_SHOWN]],
                        "truncated": len(found) > SQL_ROWS_SHOWN})
            if not args.json:
                _print_result(out[-1])
    finally:
        if own:
            spark.stop()
    if args.json:
        print_json(out)
    return EXIT_OK


def _plain(value: object) -> object:
    """A result value as JSON holds it (Rows as objects)."""
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}  # a pyspark Row
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _print_result(result: dict) -> None:
    from rich.table import Table as RichTable
    con = console()
    con.print(f"[bold]{esc(one_line(result['statement']))}[/bold]")
    if not result["columns"]:
        con.print("  done")
        return
    grid = RichTable(*[esc(c) for c in result["columns"]])
    for row in result["rows"]:
        grid.add_row(*[esc("NULL" if v is None else json.dumps(v, default=str) if isinstance(v, (dict, list))
                           else v) for v in row])
    con.print(grid)
    if result["truncated"]:
        con.print(f"  (the first {SQL_ROWS_SHOWN} rows; use --json or a LIMIT)")


# ---------------------------------------------------------------- demo


def _cmd_demo(args: argparse.Namespace) -> int:
    require("demo", "skiplake demo")  # before anything is generated or Spark starts
    from skiplake import demo
    from skiplake.tpcds import check_args
    check_args(args.sf, demo.TABLES)  # a bad --sf fails before pyspark is imported
    spark = None
    if "pyspark" in sys.modules:  # main() called inside a Spark program: reuse its session
        from skiplake.spark.session.session_setup import active_session
        spark = active_session()
    demo.run(sf=args.sf, warehouse=args.warehouse, data_dir=args.data, as_json=args.json, spark=spark)
    return EXIT_OK


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    """The parser of the `skiplake` command: its subcommands, their arguments and help."""
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

    p = add("explain", _cmd_explain, "which files a predicate (--where, one table) or a query (--sql, a lake root) "
                                     "reads: partitions, stats, buckets, and dynamic file pruning")
    p.add_argument("path", metavar="PATH", help="a table's folder (--where) or a lake root (--sql)")
    p.add_argument("--where", default=None, metavar="SQL", help='a SQL condition, e.g. "ss_item_sk IN (40, 41)"')
    p.add_argument("--sql", default=None, metavar="QUERY",
                   help="a SQL query naming the root's tables (starts Spark; runs dynamic pruning's build sides)")
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

    p = add("sql", _cmd_sql, "run SQL statements (Delta's and Spark's) on the lake's tables, in order")
    p.add_argument("--root", required=True, metavar="ROOT", help="the lake's root folder (or s3:// location)")
    p.add_argument("-e", "--execute", metavar="STATEMENTS", help="statements separated by ;")
    p.add_argument("-f", "--file", metavar="FILE", help="a file of statements separated by ;")
    p.add_argument("--json", action="store_true")
    p = add("restore", _cmd_restore, "bring a table back to an earlier version, as a new commit (RESTORE)")
    p.add_argument("path", metavar="PATH")
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--to-version", type=int, default=None, metavar="V", help="the version to go back to")
    when.add_argument("--to-timestamp", default=None, metavar="TS",
                      help="go back to the version current at this time (UTC), e.g. '2026-11-20 08:00:00'")
    p.add_argument("--json", action="store_true")

    p = add("convert", _cmd_convert, "turn a Parquet directory into a table in place: only _delta_log/ is written "
                                     "(CONVERT TO DELTA; starts Spark)")
    p.add_argument("path", metavar="PATH", help="the directory of Parquet files (as Spark's df.write.parquet writes them)")
    p.add_argument("--partition-by", default=None, metavar="COLS|DDL",
                   help='the partition folders\' columns: names ("d,region", types inferred as Spark infers them) '
                        'or typed ("d DATE, region STRING")')
    p.add_argument("--bucket-by", default=None, metavar="COL,COL",
                   help="the bucket columns of a Spark bucketBy table (with --num-buckets)")
    p.add_argument("--num-buckets", type=int, default=None, metavar="N", help="its number of buckets")
    p.add_argument("--sort-by", default=None, metavar="COL,COL", help="its sort columns (sortBy), if any")
    p.add_argument("--no-verify-buckets", action="store_true",
                   help="take the files' bucket ids on trust instead of checking every row's bucket (a Spark job "
                        "reading the bucket columns)")
    p.add_argument("--merge-schema", action="store_true",
                   help="accept files whose columns differ (the union of their columns; same types required)")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="a table property, e.g. delta.dataSkippingNumIndexedCols=8 (repeatable)")
    p.add_argument("--footer-job-threshold", type=int, default=None, metavar="FILES",
                   help="read footers with a Spark job from this many files (default 5000)")
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
    serve.add_argument("--credentials", metavar="FILE",
                       help='JSON {"principals": [{"access_key_id", "secret_access_key", "role": "read-write" or '
                            '"read-only"}]}: every request must then carry a valid AWS SigV4 signature of one of them')
    serve.add_argument("--workers", type=int, default=1, metavar="N",
                       help="worker processes (default 1); about one per core, each with its own DB connections")
    serve.add_argument("--threads", type=int, default=4, metavar="N",
                       help="catalog calls at once per worker (default 4)")
    serve.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate (chain) file")
    serve.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    serve.add_argument("--access-log", default="-", metavar="FILE",
                       help="one JSON line per request: - for stderr (default), a file, or off")
    serve.add_argument("--max-request-bytes", type=int, default=8 * 1024 * 1024, metavar="N",
                       help="largest request body accepted (default 8 MiB); larger ones get 413")
    serve.add_argument("--body-timeout", type=float, default=30.0, metavar="S",
                       help="seconds for a request's body to arrive (default 30); slower ones get 408")
    serve.add_argument("--request-timeout", type=float, default=60.0, metavar="S",
                       help="seconds for the catalog to answer (default 60), else OperationTimeoutException")
    serve.add_argument("--graceful-timeout", type=float, default=30.0, metavar="S",
                       help="seconds in-flight requests get to finish after SIGTERM (default 30)")
    serve.add_argument("--keep-alive", type=int, default=5, metavar="S",
                       help="seconds an idle client connection stays open (default 5)")
    serve.add_argument("--max-connections", type=int, default=1000, metavar="N",
                       help="open connections per worker before new requests get 503 (default 1000)")
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `skiplake` command on `argv` (sys.argv[1:] when None); the exit status: 0, 2 for an
    error (printed as one line on stderr) or a usage error, 130 when interrupted."""
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
        sys.stderr.write(f"skiplake {args.command}: error: {one_line(e)}\n")
        return EXIT_ERROR
    except (FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError) as e:
        sys.stderr.write(f"skiplake {args.command}: error: {one_line(e)}\n")
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
