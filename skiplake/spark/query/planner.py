"""`lake.sql` planning and running: an ordered list of stages, each a function of the plan.

Like sqlglot's optimizer applies its RULES, `plan_query` applies these in order; a stage that
cannot analyse the query gives up, and the query then runs over whole tables, as plain Spark
would. A new stage (dynamic file pruning comes between pushdown and bucket joins) is one module
and one entry here.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from skiplake.spark.query.bucket_joins import plan_bucket_joins
from skiplake.spark.query.model import QueryPlan, Resolver, whole_table
from skiplake.spark.query.pushdown import push_filters
from skiplake.spark.query.references import find_references

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from sqlglot import exp

Rule = Callable[["SparkSession", QueryPlan, Resolver], QueryPlan]

RULES: tuple[Rule, ...] = (
    find_references,     # 1. which lake tables the query names; each reference renamed to a view
    push_filters,        # 2. the filters Spark's optimizer pushes to each reference; plan its files
    plan_bucket_joins,   # 3. joins of two lake tables bucketed alike run without a shuffle
)


def plan_query(spark: "SparkSession", query: str, resolver: Resolver,
               tree: "exp.Expression | None" = None) -> QueryPlan:
    """The query's lake table references with their planned files, and its bucket joins."""
    plan = QueryPlan(query, tree)
    for rule in RULES:
        plan = rule(spark, plan, resolver)
        if not plan.analysed:
            break
    return plan


def run_query(spark: "SparkSession", query: str, resolver: Resolver) -> tuple["DataFrame", QueryPlan]:
    """Plan the query, then run it with each reference reading only its planned files."""
    plan = plan_query(spark, query, resolver)
    if not plan.analysed:
        # Whole tables under their own names: what plain Spark would read.
        for name, source in plan.sources.items():
            whole_table(spark, source).createOrReplaceTempView(name)
        return spark.sql(query), plan
    for ref in plan.references:
        ref.dataframe(spark).createOrReplaceTempView(ref.view)
    try:
        df = spark.sql(plan.sql)
    finally:
        # The DataFrame holds the analysed views; the names are not needed once it exists.
        for ref in plan.references:
            spark.catalog.dropTempView(ref.view)
    return df, plan
