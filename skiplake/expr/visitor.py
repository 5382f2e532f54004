"""The one walk over a predicate tree: `visit(node, visitor)`, post-order.

Every evaluator of a bound predicate (partition values and min/max stats per file, the same over
all files at once, bucket sets, SQL text, Glue expressions) is a `BooleanVisitor`: it says what
a leaf means and how AND, OR and NOT combine their children's answers, and `visit` does the
walking. This is pyiceberg's `expressions/visitors.py` shape: the tree stays plain data and
each question asked of it is one small class.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from skiplake.expr.tree import And, Cmp, Const, InList, IsNull, Node, Not, Opaque, Or, StartsWith

T = TypeVar("T")


class BooleanVisitor(ABC, Generic[T]):
    """What a predicate means in one domain; `visit` calls these bottom-up."""

    @abstractmethod
    def visit_const(self, node: Const) -> T:
        """The answer for a literal TRUE, FALSE or NULL."""

    @abstractmethod
    def visit_opaque(self, node: Opaque) -> T:
        """The answer for what cannot be analysed (it may be anything)."""

    @abstractmethod
    def visit_cmp(self, node: Cmp) -> T:
        """The answer for a column compared with a literal."""

    @abstractmethod
    def visit_in(self, node: InList) -> T:
        """The answer for an IN list."""

    @abstractmethod
    def visit_is_null(self, node: IsNull) -> T:
        """The answer for IS NULL."""

    @abstractmethod
    def visit_starts_with(self, node: StartsWith) -> T:
        """The answer for a string prefix test."""

    @abstractmethod
    def visit_and(self, node: And, children: list[T]) -> T:
        """The answer for an AND, from its children's answers."""

    @abstractmethod
    def visit_or(self, node: Or, children: list[T]) -> T:
        """The answer for an OR, from its children's answers."""

    @abstractmethod
    def visit_not(self, node: Not, child: T) -> T:
        """The answer for a NOT, from its child's answer."""


def visit(node: Node, visitor: BooleanVisitor[T]) -> T:
    """The visitor's answer for `node`, computed from its children's answers."""
    if isinstance(node, And):
        return visitor.visit_and(node, [visit(c, visitor) for c in node.children])
    if isinstance(node, Or):
        return visitor.visit_or(node, [visit(c, visitor) for c in node.children])
    if isinstance(node, Not):
        return visitor.visit_not(node, visit(node.child, visitor))
    if isinstance(node, Cmp):
        return visitor.visit_cmp(node)
    if isinstance(node, InList):
        return visitor.visit_in(node)
    if isinstance(node, IsNull):
        return visitor.visit_is_null(node)
    if isinstance(node, StartsWith):
        return visitor.visit_starts_with(node)
    if isinstance(node, Const):
        return visitor.visit_const(node)
    if isinstance(node, Opaque):
        return visitor.visit_opaque(node)
    raise TypeError(f"not a predicate node: {node!r}")


class _Columns(BooleanVisitor[frozenset[str]]):
    def visit_const(self, node: Const) -> frozenset[str]:
        return frozenset()

    def visit_opaque(self, node: Opaque) -> frozenset[str]:
        return frozenset(node.columns)

    def visit_cmp(self, node: Cmp | InList | IsNull | StartsWith) -> frozenset[str]:
        return frozenset({node.col.name})

    visit_in = visit_is_null = visit_starts_with = visit_cmp   # every leaf test names its one column

    def visit_and(self, node: And, children: list[frozenset[str]]) -> frozenset[str]:
        return frozenset().union(*children)

    def visit_or(self, node: Or, children: list[frozenset[str]]) -> frozenset[str]:
        return frozenset().union(*children)

    def visit_not(self, node: Not, child: frozenset[str]) -> frozenset[str]:
        return child


def columns_of(node: Node) -> set[str]:
    """Names of the columns a predicate refers to."""
    found: frozenset[str] = visit(node, _Columns())
    return set(found)
