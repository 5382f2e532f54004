"""Predicates: SQL text to a bound tree, evaluated three-valued over partition values and stats."""
from skiplake.expr.evaluate import ColumnRange, evaluate, file_lookup, may_match, partition_lookup
from skiplake.expr.parse import bind
from skiplake.expr.tree import Node, columns_of

__all__ = ["ColumnRange", "Node", "bind", "columns_of", "evaluate", "file_lookup", "may_match",
           "partition_lookup"]
