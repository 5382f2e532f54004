"""Glue's operation names (GetPartitions) and the Python methods that serve them (get_partitions)."""
from __future__ import annotations


def method_name(operation: str) -> str:
    """The snake_case method of a Glue operation, as boto3 and GlueCatalog name it."""
    out = []
    for i, ch in enumerate(operation):
        if ch.isupper() and i:
            out.append("_")
        out.append(ch.lower())
    return "".join(out)
