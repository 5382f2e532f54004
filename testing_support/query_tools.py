"""What a Spark query read, and TPC-DS query texts pointed at other tables: helpers of the tests
and benchmarks that compare skiplake's reads with plain Spark's."""
from __future__ import annotations

from typing import Any, Callable


def scan_metrics(df: Any) -> tuple[int, int, int]:
    """(files, bytes, rows) the file scans of an executed query read (their SQL metrics)."""
    totals = [0, 0, 0]

    def visit(node: Any) -> None:
        name = node.getClass().getSimpleName()
        if name == "AdaptiveSparkPlanExec":
            return visit(node.executedPlan())
        if name.endswith("QueryStageExec"):
            return visit(node.plan())
        if name == "FileSourceScanExec":
            metrics = node.metrics()
            for i, key in enumerate(("numFiles", "filesSize", "numOutputRows")):
                if metrics.contains(key):
                    totals[i] += int(metrics.apply(key).value())
        for i in range(node.children().size()):
            visit(node.children().apply(i))
        for i in range(node.subqueries().size()):
            visit(node.subqueries().apply(i))

    visit(df._jdf.queryExecution().executedPlan())
    return totals[0], totals[1], totals[2]


def renamed(query: str, prefix: str, tables: set[str], to: Callable[[str], str] | None = None) -> str:
    """`query` reading `<prefix><table>` (or `to(table)`) for each TPC-DS table it names (not CTEs
    of that name)."""
    import sqlglot
    from sqlglot import exp

    from skiplake.spark.query.references import names_cte
    tree = sqlglot.parse_one(query, read="spark")
    spots = []
    for t in tree.find_all(exp.Table):
        if isinstance(t.this, exp.Identifier) and not t.db and t.name.lower() in tables and not names_cte(t):
            spots.append((t.this.meta["start"], t.this.meta["end"], t.name, bool(t.alias)))
    out, last = [], 0
    for start, end, name, aliased in sorted(spots):
        out.append(query[last:start])
        out.append((to(name) if to else f"{prefix}{name}") + ("" if aliased else f" AS {name}"))
        last = end + 1
    out.append(query[last:])
    return "".join(out)
