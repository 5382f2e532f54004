"""Reading Spark's plans through py4j: node kinds, Scala sequences, the file relations a plan reads."""
from __future__ import annotations

import os
from typing import Any


def kind(node: Any) -> str:
    """The Catalyst class of a plan or expression node ("Filter", "EqualTo", ...)."""
    return node.getClass().getSimpleName()


def seq(scala_seq: Any) -> list[Any]:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def conjuncts(condition: Any) -> list[Any]:
    if kind(condition) == "And":
        return conjuncts(condition.left()) + conjuncts(condition.right())
    return [condition]


def relation_root(node: Any) -> str | None:
    """The one root folder a file relation (LogicalRelation of a HadoopFsRelation) reads, else None."""
    if kind(node) != "LogicalRelation" or kind(node.relation()) != "HadoopFsRelation":
        return None
    paths = seq(node.relation().location().rootPaths())
    return normal_path(paths[0].toString()) if len(paths) == 1 else None


def normal_path(path: str) -> str:
    return os.path.normpath(path[len("file:"):] if path.startswith("file:") else path)


def plan_children(node: Any) -> list[Any]:
    """A plan node's children, the plans inside its expressions (subqueries) and its inner
    children (a WITH's CTE definitions before analysis)."""
    out = seq(node.children()) + seq(node.subqueries())
    if hasattr(node, "innerChildren"):
        out += [c for c in seq(node.innerChildren()) if hasattr(c, "children")]
    return out
