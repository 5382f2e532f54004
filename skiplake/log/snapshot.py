"""A snapshot: the state of a table at one version, by replaying the log from the newest checkpoint.

Snapshots are immutable. Live files are held as an Arrow table (see arrow_schema), so loading a
table with 100,000 files costs one Parquet read plus the few JSON commits after it.
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skiplake.errors import (
    CorruptLogError,
    NotATableError,
    ProtocolNotSupportedError,
    VersionNotFoundError,
)
from skiplake.log.actions import (
    Action,
    AddFile,
    CommitInfo,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    Txn,
    parse_action,
)
from skiplake.log.arrow_schema import FILES_SCHEMA, TOMBSTONES_SCHEMA
from skiplake.log.checkpoint_read import (
    CheckpointHead,
    CheckpointState,
    GroupAdds,
    TypedStats,
    actions_to_arrow,
    json_lines,
    read_checkpoint,
    read_checkpoint_head,
    still_there,
)
from skiplake.log.column_mapping import logical_files, mapping_mode
from skiplake.log.deferred_stats import DeferredStats
from skiplake.log.deletion_vectors import unique_id
from skiplake.log.features import features_of
from skiplake.log.location import join
from skiplake.log.schema import Schema
from skiplake.log.storage import FileInfo, Storage
from skiplake.log.storage_for import storage_at
from skiplake.log.type_widening import FEATURES as TYPE_WIDENING
from skiplake.log.type_widening import unsupported_changes

log = logging.getLogger("skiplake.snapshot")

LOG_DIR = "_delta_log"
COMMIT_RE = re.compile(r"^(\d{20})\.json$")
CHECKPOINT_RE = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")
# A V2 checkpoint named by a UUID, in JSON or Parquet.
UUID_CHECKPOINT_RE = re.compile(r"^(\d{20})\.checkpoint\.[0-9a-fA-F]{8}-[0-9a-fA-F-]{27}\.(?:json|parquet)$")

# Protocol features this implementation reads and writes correctly. vacuumProtocolCheck asks
# readers for nothing and writers only that VACUUM checks the write protocol, which skiplake's
# VACUUM does for every table (skiplake.log.vacuum).
# Type widening: Spark's Parquet reader reads older files as the wider type; skiplake never
# changes a column's type itself, and keeps the schema's records of past changes. Variant:
# Spark 4 reads and writes the VARIANT type (shredded files included). Collations: Spark 4 compares
# collated strings; skiplake writes no min/max stats for them and skips no file by theirs.
_BOTH = {"timestampNtz", "deletionVectors", "columnMapping", "vacuumProtocolCheck", "v2Checkpoint",
         *TYPE_WIDENING, "variantType", "variantType-preview"}
SUPPORTED_READER_FEATURES = _BOTH | {"variantShredding-preview", "variantShredding"}
SUPPORTED_WRITER_FEATURES = _BOTH | {"appendOnly", "invariants", "changeDataFeed", "checkConstraints",
                                     "generatedColumns", "identityColumns", "domainMetadata", "clustering",
                                     "rowTracking", "collations-preview", "collations"}


LAST_CHECKPOINT = "_last_checkpoint"


def commit_name(version: int) -> str:
    """The file name of version `version`'s commit: `<20-digit version>.json`."""
    return f"{version:020d}.json"


def checkpoint_name(version: int) -> str:
    """The file name of a classic V1 checkpoint of version `version`."""
    return f"{version:020d}.checkpoint.parquet"


def log_storage(table_path: str) -> Storage:
    """The Storage of the table's log folder, `_delta_log`."""
    return storage_at(join(table_path, LOG_DIR))


@dataclass(frozen=True)
class LogListing:
    """A log folder's commit files by version, and its complete checkpoints."""
    commits: dict[int, FileInfo]
    checkpoints: dict[int, list[str]]  # version -> file names, complete checkpoints only

    @property
    def latest(self) -> int | None:
        """The newest version with a commit or a checkpoint listed; None when there is neither."""
        versions = list(self.commits) + list(self.checkpoints)
        return max(versions) if versions else None

    def earliest_readable(self) -> int | None:
        """The oldest version that can be rebuilt: 0 if every commit is there, else the oldest checkpoint."""
        if 0 in self.commits:
            return 0
        return min(self.checkpoints) if self.checkpoints else None


def list_log(storage: Storage, start_after: str | None = None) -> LogListing:
    """The commits and complete checkpoints in the log folder (names after `start_after` only, if given)."""
    return listing_of(storage.list(start_after))


def is_checkpoint_file(name: str) -> bool:
    """A checkpoint of any kind: classic, a part of a multi-part one, or UUID-named."""
    return bool(CHECKPOINT_RE.match(name) or UUID_CHECKPOINT_RE.match(name))


def listing_of(infos: list[FileInfo]) -> LogListing:
    """The commits and complete checkpoints among the files of a log folder's listing."""
    commits: dict[int, FileInfo] = {}
    single: dict[int, list[str]] = {}                 # classic and UUID-named checkpoints
    parts: dict[int, dict[int, list[str]]] = {}       # multi-part ones, by their number of parts
    for info in infos:
        m = COMMIT_RE.match(info.name)
        if m:
            commits[int(m.group(1))] = info
            continue
        m = CHECKPOINT_RE.match(info.name)
        if m and m.group(3):
            parts.setdefault(int(m.group(1)), {}).setdefault(int(m.group(3)), []).append(info.name)
            continue
        m = m or UUID_CHECKPOINT_RE.match(info.name)
        if m:
            single.setdefault(int(m.group(1)), []).append(info.name)
    checkpoints: dict[int, list[str]] = {}
    for version, by_total in parts.items():
        for total, names in by_total.items():
            if len(names) == total:  # a multi-part checkpoint counts only when every part is there
                checkpoints[version] = sorted(names)
                break
    for version, names in single.items():
        # One file is the whole checkpoint, so it is preferred to parts; of a classic and a
        # UUID-named one (equal content), the UUID-named, which may keep its files in sidecars.
        checkpoints[version] = [sorted(names, key=lambda n: (n.endswith(".checkpoint.parquet"), n))[0]]
    return LogListing(commits, checkpoints)


def list_latest(storage: Storage, version: int | None = None) -> LogListing:
    """What the latest version (or `version`, if not older) needs: the log from the checkpoint
    `_last_checkpoint` names on (one page of an object-store listing where the whole log of a
    long-lived table takes hundreds), or all of it when there is no such checkpoint."""
    try:
        checkpoint = int(json.loads(storage.read(LAST_CHECKPOINT))["version"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return list_log(storage)
    if version is not None and version < checkpoint:
        return list_log(storage)
    listing = list_log(storage, start_after=f"{checkpoint:020d}")
    return listing if checkpoint in listing.checkpoints else list_log(storage)


def read_commit(storage: Storage, version: int) -> list[Action]:
    """The actions of one commit file; a truncated or unparsable file is a CorruptLogError."""
    name = commit_name(version)
    where = storage.where(name)
    data = storage.read(name)
    if not data.strip():
        raise CorruptLogError(where, "the file is empty")
    actions: list[Action] = []
    for i, obj in json_lines(where, data):
        try:
            action = parse_action(obj)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise CorruptLogError(where, f"line {i}: {e}") from None
        if action is not None:
            actions.append(action)
    return actions


LISTING_ATTEMPTS = 4


def _replay_plan(table_path: str, listing: LogListing, version: int | None) -> tuple[int, list[int]]:
    """(target version, candidate starting checkpoints newest first, -1 meaning replay from 0)."""
    latest = listing.latest
    if latest is None:
        raise NotATableError(table_path)
    target = latest if version is None else version
    earliest = listing.earliest_readable()
    if target < 0 or target > latest or earliest is None or target < earliest:
        raise VersionNotFoundError(table_path, target, earliest, latest)
    # Commits lowest..target all exist; a start s works when s >= lowest - 1. Starting from the
    # newest checkpoint, an unreadable one falls back to an older one (or to replay from 0).
    lowest = target + 1
    while lowest - 1 in listing.commits:
        lowest -= 1
    starts = sorted((v for v in listing.checkpoints if lowest - 1 <= v <= target), reverse=True)
    if lowest == 0:
        starts.append(-1)
    if not starts:
        raise CorruptLogError(join(table_path, LOG_DIR, commit_name(lowest - 1)),
                              f"commit {lowest - 1} is missing, and no checkpoint at or after it "
                              f"rebuilds version {target}")
    return target, starts


def check_readable(path: str, protocol: Protocol) -> None:
    """Raise ProtocolNotSupportedError unless skiplake reads the protocol: reader version at most 3, every
    reader feature supported."""
    if protocol.minReaderVersion > 3:
        raise ProtocolNotSupportedError(path, f"reader version {protocol.minReaderVersion}")
    unsupported = set(protocol.readerFeatures or ()) - SUPPORTED_READER_FEATURES
    if unsupported:
        raise ProtocolNotSupportedError(path, "reader features " + ", ".join(sorted(unsupported)))


def _check_type_changes(path: str, protocol: Protocol, metadata: Metadata) -> None:
    """A type-widened table reads only when every change it records is one the protocol allows."""
    if set(TYPE_WIDENING) & set(protocol.readerFeatures or ()):
        unsupported = unsupported_changes(metadata.schema)
        if unsupported:
            raise ProtocolNotSupportedError(path, "type changes that are not widenings (" + "; ".join(unsupported) + ")")


def check_writable(path: str, protocol: Protocol) -> None:
    """Raise ProtocolNotSupportedError unless skiplake writes the protocol: readable, not column mapping at
    reader version 2, writer version at most 7, every writer feature (listed or implied) supported."""
    check_readable(path, protocol)
    if protocol.minReaderVersion == 2:
        raise ProtocolNotSupportedError(path, "column mapping at reader version 2 (read-only in this release)")
    if protocol.minWriterVersion > 7:
        raise ProtocolNotSupportedError(path, f"writer version {protocol.minWriterVersion}")
    # The features listed, or at a legacy writer version those it implies.
    unsupported = features_of(protocol)[1] - SUPPORTED_WRITER_FEATURES
    if unsupported:
        what = "writer features " if protocol.minWriterVersion >= 7 else \
            f"writer version {protocol.minWriterVersion}, which implies the writer features "
        raise ProtocolNotSupportedError(path, what + ", ".join(sorted(unsupported)))


def _descriptor(d: dict | None) -> dict | None:
    """A deletion vector descriptor as the log writes it (an absent offset left out)."""
    return None if d is None else {k: v for k, v in d.items() if v is not None}


FileKey = tuple[str, str]  # a logical file: (path, its deletion vector's unique id or '')


def file_keys(table: pa.Table) -> list[FileKey]:
    """The logical file key of each row of a FILES_SCHEMA or TOMBSTONES_SCHEMA table."""
    return list(zip(table.column("path").to_pylist(),
                    (unique_id(d) for d in table.column("deletionVector").to_pylist())))


def without_keys(table: pa.Table, keys: set[FileKey]) -> tuple[pa.Table, np.ndarray | None]:
    """`table` without the rows of files `keys`, and which rows it kept (None: all)."""
    if not keys or table.num_rows == 0:
        return table, None
    # Only rows whose path was touched can match: their keys are built, not the whole table's.
    paths = pa.array(sorted({p for p, _ in keys}), pa.string())
    touched = pc.is_in(table.column("path"), value_set=paths).to_numpy(zero_copy_only=False)
    if not touched.any():
        return table, None
    drop = touched.copy()
    rows = touched.nonzero()[0]
    for i, key in zip(rows, file_keys(table.take(pa.array(rows)))):
        drop[i] = key in keys
    if not drop.any():
        return table, None
    return table.filter(pa.array(~drop)), ~drop


@dataclass(frozen=True)
class FileState:
    """A snapshot's live files and tombstones, as the replay of its log left them."""
    # Live add actions, FILES_SCHEMA, as loaded: the stats of the leading rows may be unread
    # (deferred_stats). Snapshot.files is this table with every file's stats.
    file_rows: pa.Table
    tombstones: pa.Table    # remove actions still within retention, TOMBSTONES_SCHEMA
    # With column mapping, `file_rows` keys partition values and stats by logical names; these
    # are the log's own rows (physical keys), which a checkpoint writes.
    log_files: pa.Table | None = None
    # The checkpoint's typed stats, when it has them: planning reads the stats of its files from
    # there instead of parsing their JSON.
    parsed_stats: TypedStats | None = None
    # How many leading rows of `file_rows` are the checkpoint's add rows, in its order, none
    # removed since: their typed stats (parsed_stats) line up with them row for row.
    checkpoint_head: int = 0
    # The JSON stats of the leading rows of `file_rows`, left in the checkpoint at load (its typed
    # stats serve planning): Snapshot.files reads them in on first use.
    deferred_stats: DeferredStats | None = None


@dataclass(frozen=True)
class PendingFiles:
    """A snapshot's file actions left unread in a large checkpoint at load (Snapshot.load's
    files_later_from): where the checkpoint's adds are, and the file actions of the commits
    after it. A Spark job can plan a scan over them; anything else reads them in the driver."""
    storage: Storage
    names: tuple[str, ...]                      # the checkpoint's files
    version: int                                # the checkpoint's version
    groups: tuple[tuple[str, int, int], ...]    # (file under the log folder, row group, adds in it)
    added: dict[FileKey, AddFile] = field(default_factory=dict)
    removed: dict[FileKey, RemoveFile] = field(default_factory=dict)

    @property
    def checkpoint_adds(self) -> int:
        """The add actions of the checkpoint."""
        return sum(count for _, _, count in self.groups)

    def load(self, protocol: Protocol, metadata: Metadata) -> FileState:
        """The files and tombstones, replayed in the driver from the checkpoint and the commits.
        CheckpointRemovedError when log cleanup has removed the checkpoint since."""
        with still_there(self.storage, self.names):
            cp = read_checkpoint(self.storage, list(self.names), defer_stats=True)
        return _file_state(_ReplayState(self.version, protocol, metadata, base_files=cp.adds,
                                         base_tombstones=cp.removes, added=dict(self.added),
                                         removed=dict(self.removed), parsed_stats=cp.parsed_stats,
                                         base_head=cp.adds.num_rows, base_deferred=_deferred(cp)))


@dataclass(frozen=True)
class Snapshot:
    """A table at one version: its protocol, metaData, live files and tombstones, txns and metadata domains."""
    table_path: str
    version: int
    protocol: Protocol
    metadata: Metadata
    txns: dict[str, Txn]
    timestamp: int          # commit time of this version, ms since the epoch
    storage: Storage = field(repr=False, compare=False)
    # The live metadata domains (tombstones left out), by name.
    domains: dict[str, DomainMetadata] = field(default_factory=dict)
    # The files as loaded; None while they are pending (then `pending` says where they are, and
    # the first use of the files reads them in).
    loaded: FileState | None = field(default=None, repr=False, compare=False)
    pending: PendingFiles | None = field(default=None, repr=False, compare=False)

    # -------------------------------------------------------------- loading

    @staticmethod
    def load(table_path: str, version: int | None = None, storage: Storage | None = None,
             listing: LogListing | None = None, files_later_from: int | None = None) -> "Snapshot":
        """The table at `version` (the latest when None), replayed from the newest readable checkpoint.

        `listing`, when given, saves listing the log. `files_later_from`: a Parquet checkpoint of at
        least that many adds is read without its file actions, which stay pending (a Spark job
        can plan over them; any other use reads them in). When the listing turns out stale (a checkpoint
        unreadable, a file deleted by log cleanup) the log is listed again, a few times. NotATableError,
        VersionNotFoundError or CorruptLogError when the log cannot give the version;
        ProtocolNotSupportedError when skiplake cannot read it."""
        storage = storage or log_storage(table_path)
        listing = listing if listing is not None else list_latest(storage, version)
        for attempt in range(LISTING_ATTEMPTS):
            try:
                return Snapshot._load(table_path, version, storage, listing, files_later_from)
            except (CorruptLogError, FileNotFoundError):
                # An unreadable checkpoint (replay from an older one, which may need the whole
                # log), or a file that log cleanup deleted after the listing: list again.
                fresh = list_log(storage)
                if attempt + 1 == LISTING_ATTEMPTS or (set(fresh.commits) == set(listing.commits)
                                                       and fresh.checkpoints == listing.checkpoints):
                    raise
                listing = fresh
        raise AssertionError("unreachable")

    @staticmethod
    def _load(table_path: str, version: int | None, storage: Storage, listing: LogListing,
              files_later_from: int | None = None) -> "Snapshot":
        # 1. which version, from which checkpoint
        for attempt in range(LISTING_ATTEMPTS):
            try:
                target, starts = _replay_plan(table_path, listing, version)
                break
            except (VersionNotFoundError, CorruptLogError, NotATableError):
                # A directory scan that races with concurrent commits can miss a commit created
                # just before a newer one it does return; a fresh listing sees both.
                if attempt + 1 == LISTING_ATTEMPTS:
                    raise
                listing = list_log(storage)
        # 2. the newest readable checkpoint, 3. the commits after it
        state = _checkpoint_state(table_path, storage, listing, starts, defer_stats=True,
                                  files_later_from=files_later_from)
        for v in range(state.version + 1, target + 1):
            state.apply(v, read_commit(storage, v), listing.commits[v].mtime_ms, storage.where(commit_name(v)))
        if state.protocol is None or state.metadata is None:
            raise CorruptLogError(join(table_path, LOG_DIR),
                                  f"no protocol or metaData action up to version {target}")
        return Snapshot._from_state(table_path, storage, state)

    @staticmethod
    def _from_state(table_path: str, storage: Storage, state: "_ReplayState") -> "Snapshot":
        assert state.protocol is not None and state.metadata is not None
        problems = state.metadata.problems()
        if problems:
            raise CorruptLogError(state.metadata_where or join(table_path, LOG_DIR), "; ".join(problems))
        check_readable(table_path, state.protocol)
        _check_type_changes(table_path, state.protocol, state.metadata)
        pending = None if state.pending is None else replace(state.pending, added=state.added, removed=state.removed)
        return Snapshot(table_path, state.version, state.protocol, state.metadata, state.txns, state.timestamp,
                        storage, {d.domain: d for d in state.domains.values() if not d.removed},
                        _file_state(state) if pending is None else None, pending)

    @staticmethod
    def of_files(table_path: str, version: int, protocol: Protocol, metadata: Metadata, adds: GroupAdds,
                 storage: Storage, without: frozenset[FileKey] = frozenset()) -> "Snapshot":
        """A table at a version with only the files `adds` (the log's rows, their typed stats
        beside them), less the files `without`; no tombstones, txns or domains: what a task of a
        Spark job over a large checkpoint plans its share of the files with."""
        typed = adds.typed
        head = adds.rows.num_rows if typed is not None else 0
        deferred = DeferredStats.of_checkpoint(typed, head) if typed is not None and adds.stats_unread else None
        rows, head, deferred = _without_files(adds.rows, set(without), head, deferred)
        state = _ReplayState(version, protocol, metadata, base_files=rows, parsed_stats=typed, base_head=head,
                             base_deferred=deferred)
        return Snapshot(table_path, version, protocol, metadata, {}, 0, storage, {}, _file_state(state))

    def with_files(self, rows: pa.Table) -> "Snapshot":
        """This table at this version with only the live files `rows` (FILES_SCHEMA, logical
        names, stats read) and no tombstones: what a query plans over once a Spark job has kept
        these out of a checkpoint too large to read in the driver (skiplake.spark.reads.log_job)."""
        return replace(self, loaded=FileState(rows, TOMBSTONES_SCHEMA.empty_table()), pending=None)

    def advanced(self, commits: list[tuple[int, list[Action]]]) -> "Snapshot":
        """This snapshot with the next commits applied (versions self.version + 1, + 2, ...), as a
        load would replay them: a committer's view of the version it wrote, without reading back
        the log it has just read or written (nor the files of a snapshot whose files are pending)."""
        state = _ReplayState(self.version, self.protocol, self.metadata, dict(self.txns), timestamp=self.timestamp,
                             domains=dict(self.domains))
        if self.files_pending:
            assert self.pending is not None
            state.pending, state.added, state.removed = self.pending, dict(self.pending.added), \
                dict(self.pending.removed)
        else:
            now = self.file_state
            state.base_files = now.log_files if now.log_files is not None else now.file_rows
            state.base_tombstones, state.parsed_stats = now.tombstones, now.parsed_stats
            state.base_head, state.base_deferred = now.checkpoint_head, now.deferred_stats
        for version, actions in commits:
            if version != state.version + 1:
                raise ValueError(f"commit {version} does not follow version {state.version}")
            state.apply(version, actions, state.timestamp)
        return Snapshot._from_state(self.table_path, self.storage, state)

    # -------------------------------------------------------------- files

    @cached_property
    def file_state(self) -> FileState:
        """The live files and tombstones (read in the driver on first use when they are pending)."""
        if self.loaded is not None:
            return self.loaded
        assert self.pending is not None
        log.info("reading the %d files of %s's checkpoint in the driver", self.pending.checkpoint_adds,
                 self.table_path)
        return self.pending.load(self.protocol, self.metadata)

    @property
    def files_pending(self) -> bool:
        """Whether the files are still in the checkpoint, unread (see Snapshot.load's files_later_from)."""
        return self.loaded is None and "file_state" not in self.__dict__

    @property
    def file_rows(self) -> pa.Table:
        """The live add actions (FILES_SCHEMA), as loaded: the stats of leading rows may be unread
        (deferred_stats); `files` has every file's."""
        return self.file_state.file_rows

    @property
    def tombstones(self) -> pa.Table:
        """Remove actions still within retention (TOMBSTONES_SCHEMA)."""
        return self.file_state.tombstones

    @property
    def log_files(self) -> pa.Table | None:
        """With column mapping, the log's own file rows (physical keys); None without."""
        return self.file_state.log_files

    @property
    def parsed_stats(self) -> TypedStats | None:
        """The checkpoint's typed stats, when it has them."""
        return self.file_state.parsed_stats

    @property
    def checkpoint_head(self) -> int:
        """How many leading file rows are the checkpoint's adds in its order (see FileState)."""
        return self.file_state.checkpoint_head

    @property
    def deferred_stats(self) -> DeferredStats | None:
        """Where the unread JSON stats of the leading file rows are (None: all read)."""
        return self.file_state.deferred_stats

    # -------------------------------------------------------------- views

    @property
    def schema(self) -> Schema:
        """The table's schema, from metaData."""
        return self.metadata.schema

    @property
    def column_mapping(self) -> str:
        """The column mapping mode readers honour: none, name or id."""
        return mapping_mode(self.metadata.configuration, self.protocol)

    @property
    def partition_columns(self) -> list[str]:
        """The partition columns, by logical name (metaData.partitionColumns)."""
        return list(self.metadata.partitionColumns)

    @property
    def configuration(self) -> dict[str, str]:
        """A copy of the table's properties (metaData.configuration)."""
        return dict(self.metadata.configuration)

    @cached_property
    def files(self) -> pa.Table:
        """The live add actions (FILES_SCHEMA), every file's stats included (read from the
        checkpoint on first use when the load left them there)."""
        return self.file_rows if self.deferred_stats is None else self.deferred_stats.fill(self.file_rows)

    def files_with_stats(self, which: np.ndarray) -> pa.Table:
        """The live files the mask `which` selects, with their stats: for a few files of a large
        table, only the checkpoint's row groups that hold theirs are read."""
        if self.deferred_stats is None:
            return self.file_rows.filter(pa.array(which))
        if "files" in self.__dict__:   # every file's stats were read in already
            return self.files.filter(pa.array(which))
        return self.deferred_stats.fill(self.file_rows, which)

    @property
    def num_files(self) -> int:
        """The number of live files."""
        return self.file_rows.num_rows

    @property
    def size_bytes(self) -> int:
        """The live files' total size in bytes."""
        return int(pc.sum(self.file_rows.column("size")).as_py() or 0) if self.file_rows.num_rows else 0

    @cached_property
    def deleted_rows(self) -> np.ndarray:
        """Rows each live file's deletion vector marks deleted (0 without one): a file's stats
        count its physical rows, so its logical rows are numRecords minus these."""
        column = self.file_rows.column("deletionVector")
        if column.null_count == self.file_rows.num_rows:   # no file has one (or no file at all)
            return np.zeros(self.file_rows.num_rows, np.int64)
        dvs = column.combine_chunks()
        cardinality = pc.struct_field(dvs, [dvs.type.get_field_index("cardinality")])
        return pc.fill_null(pc.if_else(dvs.is_valid(), cardinality, 0), 0).to_numpy(zero_copy_only=False).astype(np.int64)

    @cached_property
    def add_files(self) -> list[AddFile]:
        """The live files as AddFile records (built on first use; planning at scale uses `files`)."""
        return add_files_from_arrow(self.files)

    @cached_property
    def tombstone_list(self) -> list[RemoveFile]:
        """The tombstones as RemoveFile records (built on first use)."""
        out = []
        for row in self.tombstones.to_pylist():
            out.append(RemoveFile(row["path"], row["deletionTimestamp"], bool(row["dataChange"]),
                                  row["extendedFileMetadata"],
                                  dict(row["partitionValues"]) if row["partitionValues"] is not None else None,
                                  row["size"], dict(row["tags"]) if row["tags"] is not None else None,
                                  _descriptor(row["deletionVector"]), row["baseRowId"], row["defaultRowCommitVersion"]))
        return out

    def domain(self, name: str) -> str | None:
        """The configuration of metadata domain `name`, None when the table has no such domain."""
        d = self.domains.get(name)
        return d.configuration if d is not None else None

    def txn_version(self, app_id: str) -> int | None:
        """The latest version application `app_id` committed (its txn action); None when it has none."""
        t = self.txns.get(app_id)
        return t.version if t else None


@dataclass
class _ReplayState:
    """A table's state while the log is replayed: a checkpoint's, then each commit applied."""
    version: int = -1                 # the last version applied (-1: none, no checkpoint)
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    txns: dict[str, Txn] = field(default_factory=dict)
    base_files: pa.Table = field(default_factory=FILES_SCHEMA.empty_table)
    base_tombstones: pa.Table = field(default_factory=TOMBSTONES_SCHEMA.empty_table)
    added: dict[FileKey, AddFile] = field(default_factory=dict)
    removed: dict[FileKey, RemoveFile] = field(default_factory=dict)
    timestamp: int = 0
    metadata_where: str = ""          # the log file the metaData in force comes from
    parsed_stats: TypedStats | None = None  # the checkpoint's typed stats, when it has them
    domains: dict[str, DomainMetadata] = field(default_factory=dict)   # the latest action per domain
    base_head: int = 0                # leading rows of base_files that are the checkpoint's adds, in order
    base_deferred: DeferredStats | None = None   # the unread stats of base_files' leading rows
    pending: PendingFiles | None = None  # the checkpoint's file actions, unread (base_files empty)

    def apply(self, version: int, actions: list[Action], file_time_ms: int, where: str = "") -> None:
        commit_ts: int | None = None
        for action in actions:
            if isinstance(action, AddFile):
                key = (action.path, unique_id(action.deletionVector))
                self.added[key] = action
                self.removed.pop(key, None)
            elif isinstance(action, RemoveFile):
                key = (action.path, unique_id(action.deletionVector))
                self.removed[key] = action
                self.added.pop(key, None)
            elif isinstance(action, Metadata):
                self.metadata, self.metadata_where = action, where
            elif isinstance(action, Protocol):
                self.protocol = action
            elif isinstance(action, Txn):
                self.txns[action.appId] = action
            elif isinstance(action, DomainMetadata):
                self.domains[action.domain] = action
            elif isinstance(action, CommitInfo):
                commit_ts = action.timestamp or None
        self.version = version
        self.timestamp = commit_ts or file_time_ms

    def tables(self) -> tuple[pa.Table, pa.Table, int, DeferredStats | None]:
        """(live files, tombstones, checkpoint head, unread stats) as Arrow tables: the
        checkpoint's, updated by the commits; the head counts the leading files that are the
        checkpoint's adds, in order."""
        touched = set(self.added) | set(self.removed)
        base, head, deferred = _without_files(self.base_files, touched, self.base_head, self.base_deferred)
        files = pa.concat_tables([base, actions_to_arrow(self.added.values(), FILES_SCHEMA)])
        tombstones = pa.concat_tables([without_keys(self.base_tombstones, touched)[0],
                                       actions_to_arrow(self.removed.values(), TOMBSTONES_SCHEMA)])
        return files, tombstones, head, deferred


def _without_files(files: pa.Table, keys: set[FileKey], head: int, deferred: DeferredStats | None
                   ) -> tuple[pa.Table, int, DeferredStats | None]:
    """A checkpoint's file rows less the files `keys`, with how many leading rows still line up
    with its adds (`head` before) and where their unread stats are."""
    rows, kept = without_keys(files, keys)
    if kept is None:
        return rows, head, deferred
    return rows, min(head, int(kept.argmin())), deferred.kept(kept) if deferred is not None else None


def _file_state(state: _ReplayState) -> FileState:
    """The files and tombstones a replay left (its checkpoint's read), under the logical names
    planning uses."""
    assert state.protocol is not None and state.metadata is not None
    files, tombstones, head, deferred = state.tables()
    mode = mapping_mode(state.metadata.configuration, state.protocol)
    if deferred is not None and mode != "none":
        # Column mapping renames the keys of every file's stats: read them now.
        files, deferred = deferred.fill(files), None
    # Column mapping: partition values and stats under the logical names planning uses (the
    # log's own rows are kept for checkpoints).
    raw = files
    files = logical_files(files, state.metadata.schema, list(state.metadata.partitionColumns), mode)
    return FileState(files, tombstones, raw if raw is not files else None, state.parsed_stats, head, deferred)


def _checkpoint_state(table_path: str, storage: Storage, listing: LogListing, starts: list[int],
                      defer_stats: bool = False, files_later_from: int | None = None) -> _ReplayState:
    """The state at the newest of `starts` whose checkpoint reads (-1: replay from version 0);
    `defer_stats`: leave the adds' JSON stats unread where typed stats cover them;
    `files_later_from`: leave the file actions of a checkpoint of at least that many adds unread."""
    for i, start in enumerate(starts):
        if start < 0:
            break
        names = listing.checkpoints[start]
        timestamp = listing.commits[start].mtime_ms if start in listing.commits else 0
        head = _large_head(storage, names, files_later_from)
        if head is not None:
            return _ReplayState(start, head.protocol, head.metadata, head.txns, timestamp=timestamp,
                                metadata_where=storage.where(names[0]), domains={d.domain: d for d in head.domains},
                                pending=PendingFiles(storage, tuple(names), start, head.groups))
        try:
            cp = read_checkpoint(storage, names, defer_stats)
        except CorruptLogError:
            if i + 1 == len(starts):
                raise
            log.warning("checkpoint %d of %s is unreadable; replaying from an older state", start, table_path)
            continue
        return _ReplayState(start, cp.protocol, cp.metadata, cp.txns, cp.adds, cp.removes,
                            timestamp=timestamp, metadata_where=storage.where(names[0]), parsed_stats=cp.parsed_stats,
                            domains={d.domain: d for d in cp.domains}, base_head=cp.adds.num_rows,
                            base_deferred=_deferred(cp))
    return _ReplayState()


def _large_head(storage: Storage, names: list[str], files_later_from: int | None) -> CheckpointHead | None:
    """The head of the checkpoint when its file actions are to stay unread: a Parquet checkpoint of
    at least `files_later_from` adds (None otherwise, or when it does not read: the full read
    then says why, or falls back to an older checkpoint)."""
    if files_later_from is None:
        return None
    try:
        head = read_checkpoint_head(storage, names)
    except CorruptLogError:
        return None
    return head if head is not None and head.adds >= files_later_from else None


def _deferred(cp: CheckpointState) -> DeferredStats | None:
    """Where the checkpoint's adds' unread stats are (None: they were read)."""
    if not cp.stats_deferred:
        return None
    assert cp.parsed_stats is not None, "stats are left unread only where typed stats cover them"
    return DeferredStats.of_checkpoint(cp.parsed_stats, cp.adds.num_rows)


def add_files_from_arrow(files: pa.Table) -> list[AddFile]:
    """Rows of a FILES_SCHEMA table as AddFile records."""
    return [AddFile(row["path"], dict(row["partitionValues"] or []), row["size"], row["modificationTime"] or 0,
                    bool(row["dataChange"]), row["stats"], dict(row["tags"]) if row["tags"] is not None else None,
                    _descriptor(row["deletionVector"]), row["clusteringProvider"], row["baseRowId"],
                    row["defaultRowCommitVersion"])
            for row in files.to_pylist()]


def commit_timestamps(storage: Storage, listing: LogListing) -> dict[int, int]:
    """Commit time of every version still in the log: commitInfo.timestamp, else the file's mtime."""
    out: dict[int, int] = {}
    for v, info in sorted(listing.commits.items()):
        ts = None
        try:
            for action in read_commit(storage, v):
                if isinstance(action, CommitInfo) and action.timestamp:
                    ts = action.timestamp
        except CorruptLogError:
            pass
        out[v] = ts or info.mtime_ms
    return out
