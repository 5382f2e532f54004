"""Reaching into Spark's plans through py4j: every such call of lake.sql planning is here.

Each call is a round trip to the JVM (a few hundred microseconds here), so the planner reads a
plan once as text (`tree_text`, parsed by plan_text) and comes back only for the few nodes it
needs: a filter's SQL, a relation's tag, a build side's size estimate and rows.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Wide enough that no relation's column list or projection is cut short in the text.
_MAX_FIELDS = 1_000_000


def kind(node: Any) -> str:
    """The Catalyst class of a plan or expression node ("Filter", "EqualTo", ...)."""
    return node.getClass().getSimpleName()


def seq(scala_seq: Any) -> list[Any]:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def plan_children(node: Any) -> list[Any]:
    """A plan node's children, the plans inside its expressions (subqueries) and its inner
    children (a WITH's CTE definitions before analysis)."""
    out = seq(node.children()) + seq(node.subqueries())
    if hasattr(node, "innerChildren"):
        out += [c for c in seq(node.innerChildren()) if hasattr(c, "children")]
    return out


def optimized_plan(df: "DataFrame") -> Any:
    return df._jdf.queryExecution().optimizedPlan()


def tree_text(plan: Any) -> str:
    """The plan as Spark prints it, every field in full, one node per line (plan_text parses it)."""
    # treeString(verbose, addSuffix, maxFields, printOperatorId, <Spark 4's fifth flag: its default>)
    return plan.treeString(False, False, _MAX_FIELDS, False, getattr(plan, "treeString$default$5")())


def node_at(plan: Any, number: int) -> Any:
    """The plan's node of that number (Spark's numbering: subqueries first, then children)."""
    return plan.apply(number)


def condition_sql(plan: Any, number: int) -> str:
    """Spark SQL text of a Filter node's condition."""
    return plan.apply(number).condition().sql()


def relation_tag(plan: Any, number: int, option: str) -> str | None:
    """A reader option of a file relation node, or None (not a file relation, or no such option)."""
    try:
        found = plan.apply(number).relation().options().get(option)
        return None if found.isEmpty() else str(found.get())
    except Exception:  # not a HadoopFsRelation
        return None


def size_in_bytes(plan: Any, number: int) -> int:
    """Spark's estimate of the size of a node's output (what its broadcast decision uses)."""
    size = plan.apply(number).stats().sizeInBytes()
    return int(size if isinstance(size, int) else size.toString())


def frame_of(spark: "SparkSession", plan: Any, number: int) -> "DataFrame":
    """A DataFrame of one node's subtree of an optimized plan, runnable on its own."""
    from pyspark.sql import DataFrame
    jdf = spark._jvm.org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, plan.apply(number))
    return DataFrame(jdf, spark)
