"""Isolation: what a transaction read, the isolation levels, and Delta's conflict checks in order."""
from skiplake.txn.commit import commit, create
from skiplake.txn.isolation import isolation_level
from skiplake.txn.read_set import ReadSet

__all__ = ["ReadSet", "commit", "create", "isolation_level"]
