"""The predicate language: SQL text to a tree bound to a schema, one visitor walk, SQL text back."""
from skiplake.expr.parse import bind
from skiplake.expr.sql import to_sql
from skiplake.expr.tree import Node, conjuncts
from skiplake.expr.visitor import BooleanVisitor, columns_of, visit

__all__ = ["BooleanVisitor", "Node", "bind", "columns_of", "conjuncts", "to_sql", "visit"]
