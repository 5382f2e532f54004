"""Whole-table views of lake tables that `lake.sql` reads through, kept for the session.

Each table reference of a query reads through a temporary view over all the files of its table's
snapshot. The analysis pass runs the query over these views; the final query is usually that
analysed plan with each pruned relation swapped for one over its planned files
(skiplake.spark.query.swap), so each view keeps its file relations and their files' paths.
Where the swap cannot be made, the final query is text again and reads a twin view that adds
FILE_COLUMN (each row's file name, from Spark's `_metadata`) with `WHERE FILE_COLUMN IN (...)`:
Spark lists only those files, but then reads the `_metadata` struct for every row, which costs
full scans 10-20%. Building a DataFrame over a file list costs tens of milliseconds, so the
views are built once per table version and slot (the n-th reference of a table in a query) and
reused by every later query.

The slot views of one table version read the same file relations (one file index each), under
output columns of their own: as for a table plain Spark reads several times in one query, Spark
reuses their scans (TPC-DS q58 reads date_dim nine times), with no edit of the analysed plan.

A catalog table (Hive-style Parquet) gets an empty view with its columns instead: its
partitions are fetched per query from the pushed predicate (skiplake.spark.reads.catalog_tables).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import threading
import uuid
from typing import TYPE_CHECKING, Any

import numpy as np

from skiplake.log.paths import file_key
from skiplake.log.snapshot import Snapshot
from skiplake.skipping.plan import plan_scan
from skiplake.spark.query.catalyst import file_relations, relation_roots, replace_nodes, tree_text, with_relation
from skiplake.spark.query.model import FILE_COLUMN, SlotView, Source, ViewRelation
from skiplake.spark.query.plan_text import PlanNode, parse_plan
from skiplake.spark.reads.catalog_tables import CatalogTable
from skiplake.spark.reads.planned_reads import read_files, spark_file_key
from skiplake.spark.session.explain_text import analysed_text
from skiplake.spark.session.gateway import is_connect
from skiplake.spark.session.setting_values import conf_count
from skiplake.spark.session.spark_types import to_spark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TAG_OPTION = "skiplake.view"  # a reader option naming the view, readable off Spark's plan
# A table of more files than this gets a view of its columns only: building a DataFrame over every
# file costs time and driver memory in proportion to the table (minutes at a million files),
# while the reference's own view of its planned files costs what it keeps.
WHOLE_VIEW_MAX_FILES = 50_000
WHOLE_VIEW_MAX_FILES_CONF = "spark.skiplake.sql.wholeTableViewMaxFiles"


class SlotViews:
    """The slot views of one Lake's session; thread-safe."""

    def __init__(self, spark: "SparkSession") -> None:
        """No views yet; `token` sets this instance's view names apart from another's in the session."""
        self.spark = spark
        self.token = uuid.uuid4().hex[:8]
        self._views: dict[tuple[Any, int], tuple[Any, SlotView]] = {}
        self._lock = threading.Lock()
        self._empty_dir: str | None = None
        self._global_db: str | None = None

    def get(self, source: Source, slot: int) -> SlotView:
        """The view of `source` for the `slot`-th reference of its table in a query: the one made for this
        table version, else a new one (replacing that of an older version)."""
        identity, version = _identity(source)
        with self._lock:
            found = self._views.get((identity, slot))
            if found is not None and found[0] == version:
                return found[1]
            local = f"__skiplake_{self.token}_{len(self._views)}_{slot}_{abs(hash((identity, version))) % 10 ** 8}"
            # (A table whose files are pending is past any such size: its files stay unread here.)
            columns_only = isinstance(source, Snapshot) and (source.files_pending or source.num_files > self._max_files())
            files = plan_scan(source).files if isinstance(source, Snapshot) and not columns_only else []
            df = self._frame(source, local, files, with_file=False, columns_only=columns_only)
            # Under Spark Connect no plan can be swapped (no JVM objects): the final query reads
            # the twin view with its file filter.
            connect = is_connect(self.spark)
            relations = _relations(df, source) if isinstance(source, Snapshot) and not connect and not columns_only \
                else ()
            sibling = self._sibling(identity, version, slot)
            if sibling is not None:
                df, relations = _sharing(self.spark, df, relations, sibling)
            # In the global temporary database, out of the user's list of views.
            df.createOrReplaceGlobalTempView(local)
            self._frame(source, local, files, with_file=True, columns_only=columns_only) \
                .createOrReplaceGlobalTempView(local + "_f")
            db = self._database()
            first = _first_id_of_view(self.spark, f"{db}.{local}") if connect else _first_id(df)
            view = SlotView(f"{db}.{local}", tuple(df.columns), first, local, f"{db}.{local}_f", relations,
                            columns_only)
            if found is not None:
                self.spark.catalog.dropGlobalTempView(found[1].local)
                self.spark.catalog.dropGlobalTempView(found[1].local + "_f")
            self._views[(identity, slot)] = (version, view)
            return view

    def _sibling(self, identity: Any, version: Any, slot: int) -> SlotView | None:
        """Another slot's view of the same table version, if one is made."""
        return next((view for (other, s), (v, view) in self._views.items()
                     if other == identity and v == version and s != slot and view.relations), None)

    def drop(self) -> None:
        """Drop every view made (both twins), and the empty folder catalog tables' views read."""
        with self._lock:
            for _version, view in self._views.values():
                self.spark.catalog.dropGlobalTempView(view.local)
                self.spark.catalog.dropGlobalTempView(view.local + "_f")
            self._views.clear()
            if self._empty_dir is not None:
                shutil.rmtree(self._empty_dir, ignore_errors=True)

    def _frame(self, source: Source, name: str, files: list, with_file: bool, columns_only: bool) -> "DataFrame":
        if isinstance(source, Snapshot) and not columns_only:
            return read_files(self.spark, source.table_path, source.schema, source.partition_columns, files,
                              file_column=FILE_COLUMN if with_file else None, tag=(TAG_OPTION, name),
                              column_mapping=source.column_mapping)
        # A file relation over an empty folder: Spark's optimizer keeps the query's filters over
        # it (over an empty local relation it would drop them), and they are what pruning plans by.
        schema = to_spark(source.schema) if isinstance(source, Snapshot) else source.ddl
        return self.spark.read.schema(schema).option(TAG_OPTION, name).parquet(self._empty())

    def _max_files(self) -> int:
        """The most files a whole-table view is built over (WHOLE_VIEW_MAX_FILES unless the session
        says); InvalidArgumentError names a setting that is not a whole number."""
        text = self.spark.conf.get(WHOLE_VIEW_MAX_FILES_CONF, None)
        return conf_count(WHOLE_VIEW_MAX_FILES_CONF, text, WHOLE_VIEW_MAX_FILES)

    def _database(self) -> str:
        if self._global_db is None:
            self._global_db = self.spark.conf.get("spark.sql.globalTempDatabase", "global_temp") or "global_temp"
        return self._global_db

    def _empty(self) -> str:
        if self._empty_dir is None:
            self._empty_dir = tempfile.mkdtemp(prefix="skiplake-empty-")
        return self._empty_dir


def _identity(source: Source) -> tuple[Any, Any]:
    """(what the table is, which state of it): a new version or schema gets a new view."""
    if isinstance(source, CatalogTable):
        return ("catalog", source.database, source.name), source.ddl
    return ("delta", os.path.normpath(source.table_path)), source.version


def _relations(df: "DataFrame", snapshot: Snapshot) -> tuple[ViewRelation, ...]:
    """The view's file relations: one per kind of file the snapshot has (planned_reads.read_files reads
    the files with deletion vectors apart), else none."""
    has_dv, marked = files_with_dv(snapshot)
    kinds = {bool(k) for k in has_dv}
    found = file_relations(df)
    if len(found) != len(kinds):
        return ()
    out = []
    for node in found:
        by_key = {spark_file_key(r): r for r in relation_roots(node)}
        out.append(ViewRelation(node, next(iter(by_key)) in marked, by_key))
    return tuple(out)


def files_with_dv(snapshot: Snapshot) -> tuple[np.ndarray, set[str]]:
    """(which of the snapshot's files have a deletion vector, their paths.file_key): a read of
    such a table is two relations (skiplake.spark.reads.planned_reads), one over each kind of file, told apart
    by the files they read."""
    has_dv = snapshot.file_rows.column("deletionVector").is_valid().to_numpy(zero_copy_only=False)
    return has_dv, {file_key(snapshot.table_path, p)
                    for p in snapshot.file_rows.column("path").filter(has_dv).to_pylist()}


def _sharing(spark: "SparkSession", df: "DataFrame", mine: tuple[ViewRelation, ...],
             sibling: SlotView) -> tuple["DataFrame", tuple[ViewRelation, ...]]:
    """`df` (a slot view's read, whose relations are `mine`) reading the sibling view's file
    relations under its own columns, with its new relations; `df` and `mine` themselves when
    they do not pair one to one with the sibling's."""
    theirs = {r.with_dv: r for r in sibling.relations}
    if len(mine) != len(sibling.relations) or {r.with_dv for r in mine} != set(theirs):
        return df, mine
    pairs = [(r.node, with_relation(r.node, theirs[r.with_dv].node.relation())) for r in mine]
    # A shared relation reads the sibling's files: its roots are the sibling's.
    shared = tuple(ViewRelation(new, r.with_dv, theirs[r.with_dv].roots) for r, (_, new) in zip(mine, pairs))
    return replace_nodes(spark, df._jdf.queryExecution().analyzed(), pairs), shared


def _first_id(df: "DataFrame") -> int | None:
    return _first_relation_id(parse_plan(tree_text(df._jdf.queryExecution().analyzed())))


def _first_id_of_view(spark: "SparkSession", name: str) -> int | None:
    """The first id of a view's relation as the server stored it (Spark Connect: a DataFrame is
    analysed anew, with new ids, on every request; the view keeps the ids of its creation)."""
    text = analysed_text(spark.table(name))
    return _first_relation_id(parse_plan(text)) if text.strip() else None


def _first_relation_id(root: PlanNode) -> int | None:
    relation = next((n for n in root.walk() if n.kind == "Relation"), None)
    out = relation.output if relation is not None else None
    return out[0].id if out else None
