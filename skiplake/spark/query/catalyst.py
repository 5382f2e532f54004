"""Reaching into Spark's plans through py4j: every such call of lake.sql planning is here.

Each call is a round trip to the JVM (a few hundred microseconds here), so the planner reads a
plan once as text (`tree_text`, parsed by plan_text) and comes back only for the few nodes it
needs: a filter's SQL, a relation's tag, a build side's size estimate and rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from skiplake.spark.session.gateway import jvm_class, plan_size

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Wide enough that no relation's column list or projection is cut short in the text.
_MAX_FIELDS = 1_000_000


def kind(node: Any) -> str:
    """The Catalyst class of a plan or expression node ("Filter", "EqualTo", ...)."""
    return node.getClass().getSimpleName()


def seq(scala_seq: Any) -> list[Any]:
    """A Scala Seq's elements as a list (a round trip per element)."""
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def plan_children(node: Any) -> list[Any]:
    """A plan node's children, the plans inside its expressions (subqueries) and its inner
    children (a WITH's CTE definitions before analysis)."""
    out = seq(node.children()) + seq(node.subqueries())
    if hasattr(node, "innerChildren"):
        out += [c for c in seq(node.innerChildren()) if hasattr(c, "children")]
    return out


def sql_frame(spark: "SparkSession", text: str) -> "DataFrame":
    """`spark.sql(text)` in one round trip (PySpark's own takes five, for arguments it has none of)."""
    from pyspark.sql import DataFrame
    return DataFrame(spark._jsparkSession.sql(text), spark)


def optimized_plan(df: "DataFrame") -> Any:
    """The DataFrame's optimized logical plan (Catalyst's optimizedPlan, a py4j object)."""
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
    return plan_size(plan.apply(number))


def frame_of(spark: "SparkSession", plan: Any, number: int) -> "DataFrame":
    """A DataFrame of one node's subtree of an optimized plan, runnable on its own."""
    return frame_over(spark, plan.apply(number))


def relation_roots(node: Any) -> list[str]:
    """The root paths of a file relation node's file index (a read over a file list: its files),
    as Spark names them."""
    text = str(node.relation().location().rootPaths().mkString("\n"))
    return text.split("\n") if text else []


def file_relations(df: "DataFrame") -> list[Any]:
    """The leaves of a DataFrame's analysed plan that are file relations, in plan order."""
    return [leaf for leaf in seq(df._jdf.queryExecution().analyzed().collectLeaves())
            if kind(leaf) == "LogicalRelation"]


def with_relation(node: Any, relation: Any) -> Any:
    """A LogicalRelation node reading `relation` (a HadoopFsRelation) under the node's own output
    columns: nothing above the node sees a difference but the files."""
    return node.copy(relation, node.output(), node.catalogTable(), node.isStreaming(), node.stream())


def filtered(spark: "SparkSession", node: Any, condition: str) -> Any:
    """An analysed Filter of `condition` (Spark SQL over the node's columns) above a plan node."""
    return frame_over(spark, node)._jdf.where(condition).queryExecution().analyzed()


def found_nodes(spark: "SparkSession", plan: Any, nodes: list[Any]) -> list[int]:
    """How many times each of `nodes` occurs in the plan, subqueries included (one round trip to
    collect them)."""
    index = jvm_class(spark, "java.util.HashMap")()
    for i, node in enumerate(nodes):
        index.put(node, i)
    found = str(plan.collectWithSubqueries(_as_scala(spark, index)).mkString(","))
    counts = [0] * len(nodes)
    for number in found.split(",") if found else []:
        counts[int(number)] += 1
    return counts


def replace_nodes(spark: "SparkSession", plan: Any, pairs: Sequence[tuple[Any, Any]],
                  subtrees: Sequence[tuple[Any, Any]] = ()) -> "DataFrame":
    """A DataFrame of a resolved plan with each node equal to a pair's first replaced by its
    second: `subtrees` from the top down (what they hold goes with them), then `pairs` from the
    leaves up."""
    edited = plan
    for items, down in ((subtrees, True), (pairs, False)):
        if not items:
            continue
        replacements = jvm_class(spark, "java.util.HashMap")()
        for old, new in items:
            replacements.put(old, new)
        # A Scala Map is a PartialFunction: transform every node that is a key into its value.
        rule = _as_scala(spark, replacements)
        edited = edited.transformDownWithSubqueries(rule) if down else edited.transformUpWithSubqueries(rule)
    # Every node is resolved (the plan's own and the replacements, each analysed on its own), so
    # the analyzer need not run over the plan again: marked analysed, it returns it as it is.
    edited.setAnalyzed()
    return frame_over(spark, edited)


def materialized(spark: "SparkSession", plan: Any, number: int) -> Any:
    """The rows of a node's subtree, evaluated once by a Spark job and kept in the JVM, as a
    LocalRelation under the node's own output columns: it can take the subtree's place in the
    plan, and a DataFrame over it reads no file."""
    node = plan.apply(number)
    # Collected as a Dataset action, so that the job is a SQL execution like any other (listeners,
    # the UI's SQL tab), then turned back into Spark's internal rows.
    rows = jvm_class(spark, "scala.collection.immutable.ArraySeq").unsafeWrapArray(
        frame_over(spark, node)._jdf.collect())
    return jvm_class(spark, "org.apache.spark.sql.catalyst.plans.logical.LocalRelation").fromExternalRows(
        node.output(), rows)


def relabeled(spark: "SparkSession", rows: Any, output: Any) -> Any:
    """A LocalRelation of `rows` (a Scala Seq of InternalRow) under the attributes `output`."""
    return jvm_class(spark, "org.apache.spark.sql.catalyst.plans.logical.LocalRelation")(
        output, rows, False, jvm_class(spark, "scala.Option").empty())


def frame_over(spark: "SparkSession", node: Any) -> "DataFrame":
    """A DataFrame of a resolved plan node."""
    from pyspark.sql import DataFrame
    return DataFrame(jvm_class(spark, "org.apache.spark.sql.classic.Dataset").ofRows(spark._jsparkSession, node),
                     spark)


def _as_scala(spark: "SparkSession", java_map: Any) -> Any:
    return jvm_class(spark, "scala.jdk.javaapi.CollectionConverters").asScala(java_map)


@dataclass(frozen=True)
class RelationParts:
    """Everything of a file relation node (a LogicalRelation over a HadoopFsRelation) but its file
    index: what a node reading other files of the same table keeps. Read once, each a py4j
    object, so that each such node then costs one round trip more than its file index."""
    node: Any
    output: Any
    catalog_table: Any
    is_streaming: bool
    stream: Any
    session: Any
    options: Any
    schema: Any                 # Some(the relation's schema)
    partition_schema: Any
    data_schema: Any
    bucket_spec: Any
    file_format: Any
    status_cache: Any
    none: Any                   # scala.None

    @staticmethod
    def of(spark: "SparkSession", node: Any) -> "RelationParts":
        """The parts of the file relation node `node`, with Spark's file status cache of its session."""
        relation = node.relation()
        session = relation.sparkSession()
        option = jvm_class(spark, "scala.Option")
        return RelationParts(
            node, node.output(), node.catalogTable(), node.isStreaming(), node.stream(), session,
            relation.options(), option.apply(relation.schema()), relation.partitionSchema(),
            relation.dataSchema(), relation.bucketSpec(), relation.fileFormat(),
            jvm_class(spark, "org.apache.spark.sql.execution.datasources.FileStatusCache").getOrCreate(session),
            option.empty())

    def relation_over(self, spark: "SparkSession", paths: list[str]) -> Any:
        """The node's relation reading only `paths`, fully qualified as Spark names them: the same
        schema, partition columns, format and options, a new file index. Spark finds the files'
        statuses in its file status cache, where listing the relation's files put them, so
        nothing is read from storage; five round trips whatever the count."""
        names = jvm_class(spark, "org.apache.commons.lang3.StringUtils").split("\n".join(paths), "\n")
        hadoop_paths = jvm_class(spark, "org.apache.hadoop.util.StringUtils").stringToPath(names)
        roots = jvm_class(spark, "scala.collection.immutable.ArraySeq").unsafeWrapArray(hadoop_paths)
        index = jvm_class(spark, "org.apache.spark.sql.execution.datasources.InMemoryFileIndex")(
            self.session, roots, self.options, self.schema, self.status_cache, self.none, self.none)
        return jvm_class(spark, "org.apache.spark.sql.execution.datasources.HadoopFsRelation")(
            index, self.partition_schema, self.data_schema, self.bucket_spec, self.file_format, self.options,
            self.session)

    def node_over(self, relation: Any) -> Any:
        """A node like this one, its output columns included, reading `relation`."""
        return self.node.copy(relation, self.output, self.catalog_table, self.is_streaming, self.stream)
