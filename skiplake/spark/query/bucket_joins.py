"""Stage 4 of `lake.sql` planning: which joins of two lake tables run as bucket joins.

A join qualifies when its right side is a lake table joined by equalities to exactly one lake
table on its left and the pair passes skiplake.spark.buckets.join_runner.check. A join's left
candidates are the tables of the same FROM clause before it, as long as every join before it
was a bucket join (only then is its output still laid out by buckets), and of those, not the
right side of a left outer or semi join. For inner joins Spark also turns WHERE equalities
between the two into join keys, so those count as keys too. The references of a qualifying join
are read as bucketed relations; the report says for every candidate join why or why not.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlglot import exp

from skiplake.layout.bucket_spec import bucket_spec_of
from skiplake.spark.buckets.join_runner import JoinReport, JoinSide, check, connect_reads, prepare_session
from skiplake.spark.query.model import QueryPlan, Resolver, TableReference
from skiplake.spark.session.gateway import is_connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Pairs = list[tuple[str, str]]  # (left column, right column) of each key equality


def plan_bucket_joins(spark: "SparkSession", plan: QueryPlan, resolver: Resolver) -> QueryPlan:
    """Stage 4: mark both references of each qualifying join as bucketed (and set the session conf it
    needs); each join checked (two lake tables by key equalities, either bucketed) is reported in plan.joins."""
    assert plan.tree is not None
    for select in plan.tree.find_all(exp.Select):
        from_ = select.args.get("from_") or select.args.get("from")
        joins = select.args.get("joins") or []
        if from_ is not None and joins:
            where = select.args.get("where")
            _FromClause(spark, plan, where.this if where is not None else None).walk(from_.this, joins)
    return plan


def join_type(join: exp.Join) -> str:
    """Spark's name of a join's type; "comma" for `FROM a, b` (WHERE equalities make it inner)."""
    side, kind = (join.side or "").upper(), (join.kind or "").upper()
    if kind == "SEMI":
        return "left_semi" if side in ("", "LEFT") else "right_semi"
    if kind == "ANTI":
        return "left_anti"
    outer = {"LEFT": "left_outer", "RIGHT": "right_outer", "FULL": "full_outer"}
    if side in outer:
        return outer[side]
    if (join.method or "").upper() == "NATURAL":
        return "natural"  # keys implied by shared names: left to Spark's own join
    if kind == "CROSS" and not join.args.get("on") and not join.args.get("using"):
        return "comma"
    return "inner"


@dataclass
class _FromClause:
    """The joins of one FROM clause, left to right, and what is still laid out by buckets."""
    spark: "SparkSession"
    plan: QueryPlan
    where: exp.Expression | None
    before: dict[int, TableReference] = field(default_factory=dict)  # bucketed inputs so far
    chain: int | None = None  # buckets per task of the bucket joins so far

    def walk(self, first: exp.Expression, joins: list[exp.Join]) -> None:
        start = self._ref_of(first)
        if start is not None:
            self.before[start] = self.plan.references[start]
        for join in joins:
            kind = join_type(join)
            right = self._ref_of(join.this)
            ok = False
            if right is not None:
                pairs = self._key_pairs(join, kind, right)
                if kind in ("comma", "cross"):
                    kind = "inner" if pairs else kind
                if len(pairs) == 1:
                    (left, keys), = pairs.items()
                    ok = self._decide(left, right, keys, kind)
            # A later join meets this join's output, laid out by buckets only if this was a bucket
            # join (a left outer or semi join keeps the left side's layout, an inner join both).
            if not ok:
                self.before, self.chain = {}, None
            elif kind == "inner":
                assert right is not None
                self.before[right] = self.plan.references[right]

    def _ref_of(self, node: exp.Expression) -> int | None:
        """The index of the Delta table reference `node` is, or None."""
        if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
            return None
        i = self.plan.positions.get(node.this.meta.get("start", -1))
        if i is None:
            return None
        ref = self.plan.references[i]
        return i if ref.snapshot is not None and ref.plan is not None else None

    def _key_pairs(self, join: exp.Join, kind: str, right: int) -> dict[int, Pairs]:
        """Key column pairs of the join, by the left reference they pair `right` with."""
        refs = self.plan.references
        out: dict[int, Pairs] = {}
        using = join.args.get("using") or []
        if using:
            for ident in using:
                holders = [i for i in self.before if refs[i].schema.find(ident.name) is not None]
                if len(holders) == 1 and refs[right].schema.find(ident.name) is not None:
                    out.setdefault(holders[0], []).append(
                        (refs[holders[0]].schema.field(ident.name).name, refs[right].schema.field(ident.name).name))
            return out
        conditions = [join.args.get("on")]
        if kind in ("inner", "comma", "cross") and self.where is not None:
            conditions.append(self.where)
        scope = {**self.before, right: refs[right]}
        for cond in conditions:
            for a, ca, b, cb in _equalities(cond, scope):
                if b == right and a != right:
                    out.setdefault(a, []).append((ca, cb))
                elif a == right and b != right:
                    out.setdefault(b, []).append((cb, ca))
        return out

    def _decide(self, left: int, right: int, keys: Pairs, kind: str) -> bool:
        """Check one join of two references (reported when either is bucketed); True if bucketed."""
        lref, rref = self.plan.references[left], self.plan.references[right]
        assert lref.snapshot is not None and rref.snapshot is not None
        if not (bucket_spec_of(lref.snapshot.configuration) or bucket_spec_of(rref.snapshot.configuration)):
            return False
        assert lref.plan is not None and rref.plan is not None
        lside = JoinSide(lref.snapshot, lref.plan, lref.label)
        rside = JoinSide(rref.snapshot, rref.plan, rref.label)
        ok, reason, buckets = check(lside, rside, keys, kind, self.spark)
        if ok and self.chain is not None and {_num_buckets(lside), _num_buckets(rside)} != {self.chain}:
            # The left input is a join's output, not a bucketed scan, and Spark coalesces
            # buckets only between two scans.
            ok, buckets = False, 0
            reason = (f"it follows a bucket join of {self.chain} buckets, so both tables need {self.chain} "
                      f"buckets (they have {_num_buckets(lside)} and {_num_buckets(rside)})")
        if ok and is_connect(self.spark):
            reads = connect_reads(self.spark, lside, rside)
            if isinstance(reads, str):
                ok, reason, buckets = False, reads, 0
            else:
                lref.bucketed_read, rref.bucketed_read = reads
        if ok:
            self.chain = buckets
            lref.bucketed = rref.bucketed = rref.merge_hint = True
            prepare_session(self.spark, lside, rside)
        self.plan.joins.append(JoinReport(lref.label, rref.label, kind, keys, ok, reason, lref.plan.report,
                                          rref.plan.report, buckets))
        return ok


def _num_buckets(side: JoinSide) -> int:
    spec = side.spec
    assert spec is not None  # check() passes a join only when both sides are bucketed
    return spec.num_buckets


def _side_of(column: exp.Column, candidates: dict[int, TableReference]) -> int | None:
    """Which reference a column belongs to: by its qualifier, else the one schema holding it."""
    qualifier = column.table.lower()
    name = column.name.lower()
    if qualifier:
        hits = [i for i, r in candidates.items() if qualifier == (r.alias or r.name).lower()]
    else:
        hits = [i for i, r in candidates.items() if r.schema.find(name) is not None]
    if len(hits) != 1 or candidates[hits[0]].schema.find(name) is None:
        return None
    return hits[0]


def _equalities(condition: exp.Expression | None, candidates: dict[int, TableReference]
                ) -> list[tuple[int, str, int, str]]:
    """(ref, column, ref, column) of each `x.a = y.b` conjunct between two different references."""
    out: list[tuple[int, str, int, str]] = []
    if condition is None:
        return out
    for conj in condition.flatten() if isinstance(condition, exp.And) else [condition]:
        if not isinstance(conj, exp.EQ) or not isinstance(conj.left, exp.Column) or not isinstance(
                conj.right, exp.Column):
            continue
        a, b = _side_of(conj.left, candidates), _side_of(conj.right, candidates)
        if a is None or b is None or a == b:
            continue
        out.append((a, candidates[a].schema.field(conj.left.name).name, b,
                    candidates[b].schema.field(conj.right.name).name))
    return out
