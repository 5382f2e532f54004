"""Row tracking: every row of the table gets a row id and a row commit version.

A table supports it when its protocol lists the writer feature `rowTracking` (with
`domainMetadata`); `delta.enableRowTracking=true` then promises readers that every row has them,
and `delta.rowTrackingSuspended=true` stops writers from assigning them. As PROTOCOL.md asks:
- each new file's `baseRowId` is one past the table's high-water mark (the highest row id given
  out), which moves on by the file's physical rows; a file's row ids are its `baseRowId` plus
  each row's index in it. The mark is the `delta.rowTracking` domain's `rowIdHighWaterMark`,
  written in the same commit.
- each new file's `defaultRowCommitVersion` is the version of the commit that adds it.
- a file logged again (a deletion vector added) and a removed file keep the values of its add.
Both depend on the version a commit lands at and on what the commits before it gave out, so
they are assigned at each attempt (`RowIds.assign`), after the conflict check. A concurrent
commit that moved the mark is no conflict: the ids are assigned past it.

Rows that a rewrite copies (OPTIMIZE, the rows UPDATE, MERGE and DELETE keep or change) keep
their ids: the rewrite writes each row's id and commit version into the materialized columns
(hidden columns of the data files, named in the configuration), a readers' value that wins over
the file's `baseRowId` + index. An updated row keeps its id, but its commit version is left null
(the new file's `defaultRowCommitVersion`: the row changed then). The commitInfo tag
`delta.rowTracking.preserved` says whether a commit kept the ids of every row it copied;
a table whose column mapping is by id, where the hidden columns cannot be read by name,
copies rows with new ids and says so.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace
from typing import Collection, Mapping, Sequence

from skiplake.errors import CorruptLogError
from skiplake.log.actions import Action, AddFile, DomainMetadata, Protocol, RemoveFile
from skiplake.log.features import ENABLE_ROW_TRACKING, ROW_TRACKING, features_of, flag

DOMAIN = "delta.rowTracking"
SUSPENDED = "delta.rowTrackingSuspended"
MATERIALIZED_ROW_ID = "delta.rowTracking.materializedRowIdColumnName"
MATERIALIZED_ROW_COMMIT_VERSION = "delta.rowTracking.materializedRowCommitVersionColumnName"
PRESERVED_TAG = "delta.rowTracking.preserved"


def enabled(configuration: Mapping[str, str]) -> bool:
    """Whether readers may count on every row having its ids."""
    return flag(configuration, ENABLE_ROW_TRACKING)


def assigns_ids(protocol: Protocol, configuration: Mapping[str, str]) -> bool:
    """Whether a commit to a table with this protocol and configuration must assign row ids."""
    return ROW_TRACKING in features_of(protocol)[1] and not flag(configuration, SUSPENDED)


def with_column_names(configuration: Mapping[str, str]) -> dict[str, str]:
    """The configuration with the names of the materialized row id and row commit version
    columns, which enabling row tracking needs (kept when already there)."""
    out = dict(configuration)
    if enabled(out):
        out.setdefault(MATERIALIZED_ROW_ID, f"_row-id-col-{uuid.uuid4()}")
        out.setdefault(MATERIALIZED_ROW_COMMIT_VERSION, f"_row-commit-version-col-{uuid.uuid4()}")
    return out


def materialized_columns(protocol: Protocol, configuration: Mapping[str, str],
                         column_mapping: str) -> tuple[str, str] | None:
    """(row id column, row commit version column) that rewrites keep copied rows' ids in, when
    the table tracks row ids and its files' hidden columns can be read by name."""
    if not (assigns_ids(protocol, configuration) and enabled(configuration)) or column_mapping == "id":
        return None
    names = configuration.get(MATERIALIZED_ROW_ID), configuration.get(MATERIALIZED_ROW_COMMIT_VERSION)
    return (names[0], names[1]) if names[0] and names[1] else None


def high_water_mark(where: str, configuration: str | None) -> int:
    """The highest row id given out, from the `delta.rowTracking` domain (-1: none yet)."""
    if configuration is None:
        return -1
    try:
        return int(json.loads(configuration)["rowIdHighWaterMark"])
    except (ValueError, KeyError, TypeError):
        raise CorruptLogError(where, f"the {DOMAIN} domain is not {{\"rowIdHighWaterMark\": n}} "
                                     f"({configuration[:80]!r})") from None


@dataclass
class RowIds:
    """A commit's row ids: the high-water mark it starts from, moved by the commits it follows."""
    table_path: str
    mark: int

    def follow(self, winner: list[Action]) -> None:
        """A commit that took a version first: its ids are given out."""
        for a in winner:
            if isinstance(a, DomainMetadata) and a.domain == DOMAIN and not a.removed:
                self.mark = max(self.mark, high_water_mark(self.table_path, a.configuration))

    def assign(self, version: int, actions: Sequence[Action]) -> list[Action]:
        """`actions` as committed at `version`: each new file with its row ids and commit
        version, the mark moved past them (a domain action), `self.mark` unchanged (an attempt
        may fail; the next starts from the same mark)."""
        mark, out = self.mark, []
        for a in actions:
            if isinstance(a, AddFile) and a.baseRowId is None:
                rows = a.num_records
                if rows is None:
                    raise ValueError(f"{a.path}: a file without numRecords cannot be given row ids")
                a = replace(a, baseRowId=mark + 1, defaultRowCommitVersion=version)
                mark += rows
            elif isinstance(a, AddFile) and a.defaultRowCommitVersion is None:
                a = replace(a, defaultRowCommitVersion=version)
            if not (isinstance(a, DomainMetadata) and a.domain == DOMAIN):
                out.append(a)
        if mark != self.mark:
            out.append(DomainMetadata(DOMAIN, json.dumps({"rowIdHighWaterMark": mark}, separators=(",", ":"))))
        return out


def preserved(actions: list[Action], accounted: Collection[str] = ()) -> bool:
    """Whether a commit kept every stable row id: no file it adds may hold rows copied with new
    ids. Files in `accounted` hold new rows or rows with their kept ids; any other new file
    may hold copies when the commit removes a file for good (a file logged again with a
    deletion vector keeps its rows where they are)."""
    removed = {a.path for a in actions if isinstance(a, RemoveFile)}
    added = {a.path for a in actions if isinstance(a, AddFile)}
    return not (removed - added and added - removed - set(accounted))
