"""Isolation levels: the table's `delta.isolationLevel`, and which commits are checked at which level."""
from __future__ import annotations

from typing import Mapping

from skiplake.errors import InvalidArgumentError
from skiplake.log.actions import Action, AddFile, RemoveFile

ISOLATION_PROPERTY = "delta.isolationLevel"
SERIALIZABLE = "Serializable"
WRITE_SERIALIZABLE = "WriteSerializable"
SNAPSHOT_ISOLATION = "SnapshotIsolation"
DEFAULT_LEVEL = WRITE_SERIALIZABLE


def isolation_level(configuration: Mapping[str, str]) -> str:
    """The level a table's commits are checked at: Serializable when its `delta.isolationLevel` says so
    (in any case), else WriteSerializable (the default)."""
    value = configuration.get(ISOLATION_PROPERTY, DEFAULT_LEVEL)
    return SERIALIZABLE if value.lower() == "serializable" else WRITE_SERIALIZABLE


def check_isolation_property(configuration: Mapping[str, str]) -> None:
    """Refuse a `delta.isolationLevel` that is neither level (a typo would silently weaken it)."""
    level = configuration.get(ISOLATION_PROPERTY)
    if level is not None and level not in (SERIALIZABLE, WRITE_SERIALIZABLE):
        raise InvalidArgumentError(
            f"{ISOLATION_PROPERTY} must be {SERIALIZABLE} or {WRITE_SERIALIZABLE}, not {level!r}")


def is_rearrangement(actions: list[Action]) -> bool:
    """True for a commit that only moves rows between files (OPTIMIZE: every add and remove has
    dataChange=false). Such a commit is checked at snapshot isolation, as in Delta. A transaction
    that read data but changed nothing is not one: its (empty) result is still a claim about the
    rows it read, checked at the table's isolation level (stricter than Delta, which lets an
    empty DELETE slip past a concurrent append under Serializable)."""
    files = [a for a in actions if isinstance(a, (AddFile, RemoveFile))]
    return bool(files) and not any(a.dataChange for a in files)
