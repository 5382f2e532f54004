"""What dynamic file pruning considers for one join: the probe relations a key reaches, and the
candidate (a join with its build side and keys) that the cost model prices and the build feeds."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skiplake.expr.tree import Col
from skiplake.skipping.dfp_cost import CostEstimate
from skiplake.spark.query.model import Occurrence, TableReference
from skiplake.spark.query.plan_text import Operand, PlanNode


@dataclass
class Target:
    """A probe relation the key reaches, and the column it is there."""
    ref: TableReference
    occ: Occurrence
    column: Col
    unclustered: str = ""   # why its files are not pruned by the key: it takes a short key list as a row filter only
    overlap: float = 1.0    # the average share of its files one key value falls into


@dataclass
class Candidate:
    """A join that may prune: its build side, each key's probe targets and build operand, and once priced
    and evaluated, the build's cost estimate, keys (`result`: BuildKeys) and seconds."""
    join: PlanNode
    build: PlanNode
    pairs: list[tuple[list[Target], Operand]]   # per key: the probe targets, the build side's operand
    keys: list[tuple[str, str]]                    # (probe column, build attribute) for the report
    probe_label: str
    build_label: str
    result: Any = None
    seconds: float = 0.0
    estimate: CostEstimate | None = None   # the cost model's figures for its build, when it decided
    rows: Any = None                       # the build's rows kept in the JVM (a Scala Seq), when a Spark job evaluated it

    @property
    def rows_only(self) -> bool:
        """Every probe target takes the keys as a row filter only: a Spark job for them does not pay."""
        return all(t.unclustered for targets, _op in self.pairs for t in targets)
