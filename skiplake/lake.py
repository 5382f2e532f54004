"""A Lake: tables as folders under one root and/or a Glue-compatible catalog, and Spark SQL over them."""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from skiplake.errors import EntityNotFoundError, InvalidArgumentError, NotATableError, UnsupportedLocationError
from skiplake.layout.bucket_spec import BucketSpec
from skiplake.log.location import is_remote, join, resolve
from skiplake.log.snapshot import Snapshot, list_latest, log_storage
from skiplake.log.storage_for import has_log, storage_at
from skiplake.spark.buckets.join_runner import JoinReport, bucket_join
from skiplake.spark.query.frames import prune_frame
from skiplake.spark.query.log_answers import LogAnswer, plan_log_answer
from skiplake.spark.query.log_answers import enabled as log_answers_enabled
from skiplake.spark.query.model import QueryExplain, Source, whole_table
from skiplake.spark.query.planner import plan_query, run_query
from skiplake.spark.query.views import SlotViews
from skiplake.spark.reads.catalog_tables import CatalogTable
from skiplake.spark.reads.log_job import min_files
from skiplake.spark.session.object_stores import use_location
from skiplake.spark.session.session_setup import ensure_conf
from skiplake.spark.source.datasource import register
from skiplake.statements.runner import Query, run_script, run_statement, spark_owns, statement_of
from skiplake.statements.time_travel import rewrite
from skiplake.table import Table
from skiplake.txn.identity import IdentityColumn

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from skiplake.catalog.client import CatalogClient
    from skiplake.log.schema import Schema

__all__ = ["Lake", "QueryExplain"]


class Lake:
    """Tables as folders under `root`, and/or the tables of a Glue-compatible `catalog` (a
    GlueCatalog, a database URL, a server endpoint or a boto3 Glue client) in `database`."""

    def __init__(self, spark: "SparkSession", root: str | None = None, catalog: Any = None,
                 database: str = "default", storage_options: Mapping[str, str] | None = None) -> None:
        """A lake over `root` (a local folder, made if missing, or an s3:// location, reached with
        `storage_options`) and/or `catalog`; the session gets the Spark conf skiplake needs.

        Neither a root nor a catalog raises InvalidArgumentError."""
        if root is None and catalog is None:
            raise InvalidArgumentError("Lake needs a root folder, a catalog, or both")
        ensure_conf(spark)
        register(spark)   # format("skiplake") for plain Spark reads, writes and streams
        self.spark = spark
        self.root = use_location(spark, root, storage_options) if root is not None else None
        if self.root is not None and not is_remote(self.root):
            os.makedirs(self.root, exist_ok=True)
        self.catalog: "CatalogClient | None" = None
        if catalog is not None:
            from skiplake.catalog.client import catalog_client
            self.catalog = catalog_client(catalog)
        self.database = database
        self.last_explain: QueryExplain | None = None   # what the latest sql(...) read
        self._views = SlotViews(spark)
        self._snapshots: dict[str, Snapshot] = {}

    # ------------------------------------------------------------------ tables

    def path_of(self, name: str) -> str:
        """The location of the lake table `name`: its folder under the root.

        InvalidArgumentError when the lake has no root, or `name` is empty, holds a `/` or starts with
        `.` or `_`."""
        if self.root is None:
            raise InvalidArgumentError(f"this Lake has no root folder for table {name!r}; use catalog_table(...)")
        if not name or "/" in name or name.startswith((".", "_")):
            raise InvalidArgumentError(f"{name!r} is not a valid table name: use letters, digits and _")
        return join(self.root, name)

    def create_table(self, name: str, schema: "StructType | Schema | str",
                     partition_by: Sequence[str] | None = None, bucket_by: BucketSpec | None = None,
                     properties: Mapping[str, str] | None = None, description: str | None = None,
                     generated_columns: Mapping[str, str] | None = None,
                     identity_columns: Mapping[str, IdentityColumn] | None = None,
                     cluster_by: Sequence[str] | None = None) -> Table:
        """A new table `name` under the lake's root, named `name` in its metadata; the other arguments
        are Table.create's. TableAlreadyExistsError when the table exists; InvalidArgumentError for a
        lake without a root or a name path_of refuses."""
        return Table.create(self.spark, self.path_of(name), schema, partition_by, bucket_by, properties,
                            name=name, description=description, generated_columns=generated_columns,
                            identity_columns=identity_columns, cluster_by=cluster_by)

    def convert(self, name: str, partition_by: "Sequence[str] | str | StructType | None" = None,
                bucket_by: BucketSpec | None = None, *, catalog_table: str | None = None,
                properties: Mapping[str, str] | None = None, description: str | None = None,
                merge_schema: bool = False, verify_buckets: bool = True, footer_job_threshold: int | None = None,
                progress: Callable[[str], None] | None = None) -> Table:
        """The Parquet directory `name` under the lake's root, converted in place into the lake
        table `name` (Table.convert: only `_delta_log/` is written). A directory elsewhere is
        converted with Table.convert(spark, path) and opened by path: the lake finds its tables
        under its root. With catalog_table=..., the session catalog table's partition columns and
        bucket spec are taken; its location must be this folder."""
        return Table.convert(self.spark, self.path_of(name), partition_by, bucket_by, catalog_table=catalog_table,
                             properties=properties, name=name, description=description, merge_schema=merge_schema,
                             verify_buckets=verify_buckets, footer_job_threshold=footer_job_threshold,
                             progress=progress)

    def table(self, name: str, version: int | None = None, timestamp: str | None = None) -> Table | CatalogTable:
        """A table under the root, or else (with a catalog) the catalog's table of that name; at
        `version` or `timestamp` when given (a Delta table's only)."""
        if self._under_root(name) or self.catalog is None:
            return Table.open(self.spark, self.path_of(name), version, timestamp)
        return self.catalog_table(name, version, timestamp)

    def tables(self) -> list[str]:
        """The Delta tables under the root (not the catalog's)."""
        if self.root is None:
            return []
        return [e for e in sorted(storage_at(self.root).dirs()) if has_log(join(self.root, e))]

    def catalog_table(self, name: str, version: int | None = None, timestamp: str | None = None) -> Table | CatalogTable:
        """The catalog's table `name` (`db.table` or a table of this lake's database): a skiplake
        Table when its location holds a Delta log (at `version` or `timestamp` when given), else a
        CatalogTable of Hive-style Parquet, which has no versions."""
        if self.catalog is None:
            raise InvalidArgumentError("this Lake has no catalog; pass catalog= to Lake(...)")
        database, _, table = name.rpartition(".")
        database = database or self.database
        try:
            spec = self.catalog.call("GetTable", {"DatabaseName": database, "Name": table})["Table"]
        except EntityNotFoundError:
            raise NotATableError(f"{database}.{table}", "the catalog has no such table") from None
        location = (spec.get("StorageDescriptor") or {}).get("Location") or ""
        try:
            path = resolve(location) if location else ""
        except UnsupportedLocationError:
            path = ""  # a store only Spark reaches (gs://, hdfs://): read as Hive-style Parquet by Spark
        if path and has_log(path):
            return Table.open(self.spark, path, version, timestamp)
        if version is not None or timestamp is not None:
            raise InvalidArgumentError(f"{database}.{table} is Parquet without a Delta log: it has no versions to read "
                                       "(drop version= and timestamp=, or convert it: CONVERT TO DELTA)")
        return CatalogTable(self.spark, self.catalog, database, table, spec)

    def latest_snapshot(self, path: str) -> Snapshot:
        """The latest snapshot of the table at `path` (a folder, or s3://bucket/key under the lake's
        storage options): the one loaded before while no commit came since, so that its parsed
        stats and `lake.sql`'s views of it are reused (``delta.`path` `` in a query)."""
        return self._latest(use_location(self.spark, path, None))

    def _latest(self, path: str) -> Snapshot:
        """The table's latest snapshot; the one loaded before while no commit came since (its
        parsed stats and whole-table views stay valid with it)."""
        listing = list_latest(log_storage(path))
        cached = self._snapshots.get(path)
        if cached is not None and cached.version == listing.latest:
            return cached
        # Past the replay bound its files stay pending: lake.sql plans them by a Spark job.
        snapshot = Snapshot.load(path, storage=cached.storage if cached else None, listing=listing,
                                 files_later_from=min_files(self.spark))
        self._snapshots[path] = snapshot
        return snapshot

    def _under_root(self, name: str) -> bool:
        return self.root is not None and has_log(join(self.root, name))

    # ------------------------------------------------------------------ SQL

    def sql(self, query: str) -> "DataFrame":
        """Run one statement of Spark SQL or of Delta's SQL, as spark.sql does: at once, and its
        result in the DataFrame returned.

        A query names lake tables like any table (and ``delta.`path` ``, `name VERSION AS OF n`,
        `name TIMESTAMP AS OF ts`, `table_changes('name', start, end)`): the literal predicates
        Spark can push to each table reference prune its partitions and files first, and the keys
        of a join's selective build side prune the other side's files (dynamic file pruning).
        `last_explain` then holds what was read, with the build sides' times and key counts.

        Delta's statements (CREATE / ALTER / DROP TABLE, INSERT, UPDATE, DELETE, MERGE INTO,
        OPTIMIZE, VACUUM, RESTORE, DESCRIBE HISTORY | DETAIL, SHOW TBLPROPERTIES, CONVERT TO
        DELTA) run through the Table API and return delta-spark's result columns
        (docs/sql-reference.md). A statement skiplake cannot run raises SqlStatementError."""
        statement = statement_of(query)
        if not isinstance(statement, Query) and not spark_owns(self, statement):
            self.last_explain = None
            return run_statement(self, statement)
        text, resolver, answer = self._query(statement.text)
        if answer is not None:
            self.last_explain = answer.explain()
            return answer.run(self.spark)
        df, plan = run_query(self.spark, text, resolver, self._views)
        self.last_explain = plan.explain() if plan.analysed else None
        return df

    def _query(self, query: str) -> tuple[str, "_LakeTables", LogAnswer | None]:
        """(the query with ``delta.`path` ``, time travel and table_changes(...) rewritten to names
        it reads, how its names resolve, its answer from the log when the stats give one), as
        sql() and explain() both plan it."""
        rewritten = rewrite(self, query)
        for name, frame in rewritten.views.items():
            frame.createOrReplaceTempView(name)
        resolver = _LakeTables(self, rewritten.snapshots)
        answer = plan_log_answer(self.spark, rewritten.query, resolver) if log_answers_enabled(self.spark) else None
        return rewritten.query, resolver, answer

    def sql_script(self, script: str) -> list["DataFrame"]:
        """Run the `;`-separated statements of `script` in order (comments and quoted text
        respected), each as sql(...) runs it; their results in order. The first statement that
        fails stops the script with SqlScriptError, which gives its number, line and text; the
        statements before it stay committed."""
        return run_script(self, script)

    @contextmanager
    def readable_by_name(self, names: Sequence[str]) -> Iterator[None]:
        """While in the block, the lake tables among `names` are readable by Spark under their
        names (temporary views of their whole tables), for SQL text Spark runs as it is (an
        UPDATE's subquery). A name the session already has a view or table of is left to it."""
        tables = _LakeTables(self)
        made: list[str] = []
        for name in dict.fromkeys(n.lower() for n in names):
            source = tables.source(name)
            if source is not None and not self.spark.catalog.tableExists(name):
                whole_table(self.spark, source).createOrReplaceTempView(name)
                made.append(name)
        try:
            yield
        finally:
            for name in made:
                self.spark.catalog.dropTempView(name)

    def explain(self, query: str) -> QueryExplain:
        """One scan report per lake table reference of `query`: what `sql(query)` would read.
        Its `joins` say, for each join of two lake tables, whether it runs as a bucket join, and
        `dynamic`, for each equi-join, whether dynamic file pruning applied (build sides are run
        to know their keys, and timed)."""
        text, resolver, answer = self._query(query)
        if answer is not None:
            return answer.explain()
        plan = plan_query(self.spark, text, resolver, self._views)
        if not plan.analysed:
            raise InvalidArgumentError(f"cannot plan the scans of this query ({plan.reason}); "
                                       "lake.sql() runs it over whole tables")
        return plan.explain()

    def prune(self, df: "DataFrame") -> "DataFrame":
        """`df` (joins and filters of `t.read()` results) reading only the files its filters and
        joins allow: the pushed filters of each read, and dynamic file pruning by the keys of the
        joins' selective build sides, as `sql` plans them. `last_explain` then holds the report.
        Reads of tables by other means are left as they are."""
        pruned, plan = prune_frame(self.spark, df, self._snapshot_at, self._views)
        self.last_explain = plan.explain()
        return pruned

    def _snapshot_at(self, path: str, version: int) -> Snapshot:
        cached = self._snapshots.get(path)
        if cached is not None and cached.version == version:
            return cached
        return Snapshot.load(path, version)

    # ------------------------------------------------------------------ bucket joins

    def bucket_join(self, left: "Table | str", right: "Table | str",
                    on: str | Sequence[str] | Sequence[tuple[str, str]], how: str = "inner",
                    left_where: str | None = None, right_where: str | None = None) -> "DataFrame":
        """Join two lake tables on `on`; when both are bucketed alike on those columns, with no
        shuffle of either side (each task joins one bucket's files). See explain_join."""
        df, _ = self._bucket_join(left, right, on, how, left_where, right_where)
        return df

    def explain_join(self, left: "Table | str", right: "Table | str",
                     on: str | Sequence[str] | Sequence[tuple[str, str]], how: str = "inner",
                     left_where: str | None = None, right_where: str | None = None) -> JoinReport:
        """What bucket_join(...) would do: each side's scan, and bucket join or why not."""
        _, report = self._bucket_join(left, right, on, how, left_where, right_where)
        return report

    def _bucket_join(self, left: "Table | str", right: "Table | str", on: Any, how: str,
                     left_where: str | None, right_where: str | None) -> tuple["DataFrame", JoinReport]:
        sides = []
        for t in (left, right):
            table = self.table(t) if isinstance(t, str) else t
            if not isinstance(table, Table):
                raise InvalidArgumentError(f"{t!r} is not a skiplake (Delta) table; bucket joins need two")
            sides.append(table.snapshot)
        labels = [t if isinstance(t, str) else None for t in (left, right)]
        return bucket_join(self.spark, sides[0], sides[1], on, how, left_where, right_where, labels[0], labels[1])


class _LakeTables:
    """How `lake.sql` resolves a query's table names: the root's tables, then the catalog's.

    A name is looked up where its table would be (one check of its log folder, as named and in
    lower case); the root is listed only when neither holds a table, so that a query pays for the
    tables it names, not for every table of the lake (on an object store, a LIST each)."""

    def __init__(self, lake: Lake, snapshots: Mapping[str, Snapshot] | None = None) -> None:
        self.lake = lake
        self._listed: dict[str, str] | None = None
        self._snapshots = {k.lower(): v for k, v in (snapshots or {}).items()}  # time travel's names

    @property
    def known(self) -> dict[str, str]:
        """The root's tables by lower-case name (listed once, when needed)."""
        if self._listed is None:
            self._listed = {t.lower(): t for t in self.lake.tables()}
        return self._listed

    def source(self, name: str) -> Source | None:
        pinned = self._snapshots.get(name.lower())
        if pinned is not None:
            return pinned
        folder = self._folder(name)
        if folder is not None:
            return self.lake._latest(self.lake.path_of(folder))
        if self.lake.catalog is None:
            return None
        try:
            found = self.lake.catalog_table(name)
        except NotATableError:
            return None
        return found.snapshot if isinstance(found, Table) else found

    def _folder(self, name: str) -> str | None:
        """The root's folder of table `name` (any case), or None."""
        if self.lake.root is None or not name or "/" in name or name.startswith((".", "_")):
            return None
        for candidate in dict.fromkeys((name, name.lower())):
            if self.lake._under_root(candidate):
                return candidate
        return self.known.get(name.lower())

    def unknown(self, name: str) -> Exception:
        lake = self.lake
        where = join(lake.root, name) if lake.root else f"{lake.database}.{name}"
        return NotATableError(where, f"the query names table {name!r}; the lake has {sorted(self.known.values())}")
