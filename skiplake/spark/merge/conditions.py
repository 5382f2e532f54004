"""What the SQL text of a MERGE's conditions says, read with sqlglot (no Spark).

The parts of the ON condition and of clause conditions that name only the target's columns (they
prune the target's files), the equalities between a target column and a source expression (the
source's keys prune the target), and what Delta refuses in a condition: non-deterministic
functions, aggregates and subqueries.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from sqlglot import exp

from skiplake.errors import InvalidPredicateError
from skiplake.expr.parse import and_conjuncts, parse_sql

# Spark's non-deterministic functions (a condition must give the same answer on every pass).
_NON_DETERMINISTIC = {
    "rand", "randn", "random", "uuid", "shuffle", "monotonically_increasing_id", "spark_partition_id",
    "input_file_name", "input_file_block_start", "input_file_block_length", "randstr", "uniform",
}


def parsed(text: str) -> exp.Expression | None:
    """The sqlglot tree of `text`, or None when sqlglot cannot read it (Spark then judges it)."""
    try:
        return parse_sql(text)
    except InvalidPredicateError:
        return None


@dataclass(frozen=True)
class Sides:
    """Which side of a MERGE a column names: by its qualifier, or, unqualified, by which side
    alone has a column of that name (as Spark resolves it; a name both have is neither's)."""
    target_alias: str
    source_alias: str
    target_names: frozenset[str] = frozenset()   # lowercase
    source_names: frozenset[str] = frozenset()

    @staticmethod
    def of(target_alias: str, source_alias: str, target_names: Iterable[str], source_names: Iterable[str]) -> "Sides":
        """The sides of two aliases and each side's column names (in any case)."""
        return Sides(target_alias, source_alias, frozenset(n.lower() for n in target_names),
                     frozenset(n.lower() for n in source_names))

    def target_only(self) -> "Sides":
        """The sides of a NOT MATCHED BY SOURCE condition, which sees the target's columns alone."""
        return Sides(self.target_alias, self.source_alias, self.target_names)

    def side(self, col: exp.Column) -> str | None:
        """The side `col` names, "target" or "source"; None for a qualifier that is neither alias, or
        an unqualified name both sides have or neither has."""
        if col.table:
            return {self.target_alias.lower(): "target", self.source_alias.lower(): "source"}.get(col.table.lower())
        name = col.name.lower()
        in_target, in_source = name in self.target_names, name in self.source_names
        return "target" if in_target and not in_source else "source" if in_source and not in_target else None

    def only(self, part: exp.Expr, side: str) -> bool:
        """Whether an expression names columns of `side` only (at least one), and no subquery."""
        cols = list(part.find_all(exp.Column))
        return bool(cols) and all(self.side(c) == side for c in cols) and not any(
            isinstance(n, (exp.Subquery, exp.Select)) for n in part.walk())


def _unqualified(part: exp.Expr) -> str:
    bare = part.transform(lambda n: exp.column(n.name, quoted=True) if isinstance(n, exp.Column) else n)
    return bare.sql(dialect="spark")


def target_only_conjuncts(text: str, sides: Sides) -> str | None:
    """The AND-conjuncts of a condition that reference only target columns, as unqualified SQL;
    None when there are none."""
    tree = parsed(text)
    if tree is None:
        return None
    kept = [_unqualified(p) for p in and_conjuncts(tree) if sides.only(p, "target")]
    return " AND ".join(f"({k})" for k in kept) if kept else None


def key_equalities(on: str, sides: Sides) -> list[tuple[str, str]]:
    """(target column, source expression as SQL) of each `target.col = <source expression>`
    conjunct of a MERGE condition (either way round)."""
    tree = parsed(on)
    if tree is None:
        return []
    out = []
    for part in and_conjuncts(tree):
        if not isinstance(part, exp.EQ):
            continue
        for t, other in ((part.left, part.right), (part.right, part.left)):
            if isinstance(t, exp.Column) and sides.side(t) == "target" and sides.only(other, "source"):
                out.append((t.name, other.sql(dialect="spark")))
                break
    return out


def refused(text: str) -> tuple[str, str] | None:
    """(reason, what) when a condition holds what Delta refuses in a MERGE condition: a
    non-deterministic function, an aggregate or window, a subquery; None when it holds none."""
    tree = parsed(text)
    if tree is None:
        return None
    for node in tree.walk():
        if isinstance(node, (exp.Subquery, exp.Select)):
            return "subquery", "a subquery"
        if isinstance(node, (exp.AggFunc, exp.Window)):
            return "aggregate", f"the aggregate {node.sql(dialect='spark')}"
        if isinstance(node, exp.Func):
            name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
            if name in _NON_DETERMINISTIC:
                return "non_deterministic", f"the non-deterministic function {name}()"
    return None
