"""`lake.sql` planning and running: an ordered list of stages, each a function of the plan.

Like sqlglot's optimizer applies its RULES, `plan_query` applies these in order; a stage that
cannot analyse the query gives up, and the query then runs over whole tables, as plain Spark
would. The final query is the analysis pass's analysed plan with each pruned relation swapped
for one over its planned files (skiplake.spark.query.swap), or that pass's DataFrame itself when
nothing was pruned; where that cannot be, it is the user's text with each lake reference
replaced by its whole-table view filtered to the files planned for it (Spark lists only those),
or by a view of its own where it needs one (a bucketed read, a catalog table).
"""
from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Callable

from skiplake.spark.pruning.pruning_settings import DynamicPruningSettings
from skiplake.spark.query.bucket_joins import plan_bucket_joins
from skiplake.spark.query.dynamic_pruning import prune_dynamically
from skiplake.spark.query.model import QueryPlan, Resolver, TableReference, whole_table
from skiplake.spark.query.pushdown import push_filters
from skiplake.spark.query.references import find_references
from skiplake.spark.query.swap import swapped
from skiplake.spark.reads.catalog_tables import CatalogTable
from skiplake.spark.session.gateway import is_connect, quick_replies

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from sqlglot import exp

    from skiplake.spark.query.views import SlotViews

Rule = Callable[["SparkSession", QueryPlan, Resolver], QueryPlan]

RULES: tuple[Rule, ...] = (
    find_references,     # 1. which lake tables the query names; each reads through a slot view
    push_filters,        # 2. the filters Spark's optimizer pushes to each reference; plan its files
    prune_dynamically,   # 3. join build sides' keys prune the other side's files (dynamic file pruning)
    plan_bucket_joins,   # 4. joins of two lake tables bucketed alike run without a shuffle
)


def plan_query(spark: "SparkSession", query: str, resolver: Resolver, views: "SlotViews",
               tree: "exp.Expr | None" = None) -> QueryPlan:
    """The query's lake table references with their planned files, its dynamic pruning and joins."""
    quick_replies(spark)  # planning reads plans as text: long replies
    plan = QueryPlan(query, tree, views, DynamicPruningSettings.of(spark))
    for rule in RULES:
        started = time.perf_counter()
        plan = rule(spark, plan, resolver)
        plan.timings[rule.__name__] = time.perf_counter() - started
        if not plan.analysed:
            break
    return plan


def run_query(spark: "SparkSession", query: str, resolver: Resolver,
              views: "SlotViews") -> tuple["DataFrame", QueryPlan]:
    """Plan the query, then run it with each reference reading only its planned files."""
    plan = plan_query(spark, query, resolver, views)
    if not plan.analysed:
        # Whole tables under their own names: what plain Spark would read.
        for name, source in plan.sources.items():
            whole_table(spark, source).createOrReplaceTempView(name)
        return spark.sql(query), plan
    started = time.perf_counter()
    frame = final_frame(spark, plan)
    plan.timings["final_frame"] = time.perf_counter() - started
    return frame, plan


def final_frame(spark: "SparkSession", plan: QueryPlan) -> "DataFrame":
    """The query as it finally runs: the analysis pass's plan with its pruned relations swapped
    (that pass's DataFrame itself when nothing was pruned), else the query text over each
    reference's files."""
    if plan.analysis is not None and plan.optimized is not None:  # not under Spark Connect
        frame, how = swapped(spark, plan)
        if frame is not None:
            if frame is not plan.analysis:
                plan.notes.append(f"final plan: {how}")
            return frame
        plan.notes.append(f"final query analysed again: {how}")
    token = uuid.uuid4().hex[:8]
    own = [ref for ref in plan.references if _needs_own_view(ref)]
    for i, ref in enumerate(own):
        ref.own_view = f"__skiplake_q{token}_{i}"
    text = plan.text(final=True)
    if not own and plan.analysis is not None and text == plan.text(final=False):
        return plan.analysis
    if is_connect(spark):
        return _with_frames(spark, text, {ref.own_view: ref.frame(spark) for ref in own})
    for ref in own:
        ref.frame(spark).createOrReplaceTempView(ref.own_view)
    try:
        return spark.sql(text)
    finally:
        # The DataFrame holds the analysed views; the names are not needed once it exists.
        for ref in own:
            spark.catalog.dropTempView(ref.own_view)


def _with_frames(spark: "SparkSession", text: str, frames: dict[str, "DataFrame"]) -> "DataFrame":
    """`text` reading `frames` where it names them, under Spark Connect: a Connect DataFrame of
    SQL is analysed when it runs, after a temporary view dropped here would be gone, so the
    frames go with the query as its DataFrame arguments (`spark.sql(text, name=df)`)."""
    if not frames:
        return spark.sql(text)
    # Braces are the arguments' markers: the query's own are doubled, then each name marked.
    escaped = text.replace("{", "{{").replace("}", "}}")
    for name in frames:
        escaped = escaped.replace(name, "{" + name + "}")
    return spark.sql(escaped, None, **frames)


def _needs_own_view(ref: TableReference) -> bool:
    """A catalog table, one side of a bucket join (but for Spark Connect's bucketed reads, which
    are text), a table too large for a whole-table view, or files its slot view cannot filter by
    name."""
    if ref.bucketed_read is not None:
        return False
    if isinstance(ref.source, CatalogTable) or ref.bucketed:
        return True
    if ref.view is not None and ref.view.columns_only:   # no files to filter: its planned files
        return True
    try:
        ref.file_filter()
    except ValueError:
        return True
    return False
