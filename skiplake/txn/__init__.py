"""Commits: what a transaction read, the isolation levels, Delta's conflict checks in order and the
row-level rebases past them, the rules a commit keeps (table definitions, constraints, clustering,
identity columns, row tracking), and RESTORE."""
from skiplake.txn.commit import commit, create
from skiplake.txn.isolation import isolation_level
from skiplake.txn.read_set import ReadSet

__all__ = ["ReadSet", "commit", "create", "isolation_level"]
