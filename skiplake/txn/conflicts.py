"""Delta's conflict checks, in Delta's order, of one winning commit against this transaction.

protocol, metadata, application transaction ids, files added that this transaction's reads
would have seen, files removed that it read, files both removed. Each raises the exception
Delta raises, with what happened, where, and what to do.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa

from skiplake.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentModificationError,
    ConcurrentTransactionException,
    MetadataChangedException,
    ProtocolChangedException,
)
from skiplake.layout.partitioning import partition_dir
from skiplake.log.actions import Action, AddFile, CommitInfo, DomainMetadata, Metadata, Protocol, RemoveFile, Txn
from skiplake.log.column_mapping import logical_partition_values, logical_stats
from skiplake.log.deletion_vectors import unique_id
from skiplake.log.features import deletion_vectors_enabled
from skiplake.log.snapshot import Snapshot
from skiplake.skipping.local_build import any_row
from skiplake.skipping.metrics import file_lookup, may_match
from skiplake.skipping.rows import NotExact
from skiplake.txn.isolation import SERIALIZABLE, WRITE_SERIALIZABLE, is_rearrangement
from skiplake.txn.read_set import ReadSet
from skiplake.txn.row_level import MarkedByBoth, is_row_change, marked_paths, rebase
from skiplake.txn.row_placements import AnyPlacement, placements, rebase_compaction, rebase_onto_compaction
from skiplake.txn.row_tracking import materialized_columns

# The operations whose new files are rows they changed: under WriteSerializable, with row-level
# concurrency, those new rows conflict with nobody (the matrix of the seed: DML vs DML conflict
# only on the same row).
ROW_LEVEL_OPERATIONS = ("DELETE", "UPDATE", "MERGE")
# The most bytes of a winner's added files read to check this transaction's reads row by row
# (when their stats cannot rule them out); past it the stats decide alone.
EXACT_CHECK_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class _Winner:
    """A commit that took a version this transaction wanted, and how messages name it."""
    version: int
    actions: list[Action]
    snapshot: Snapshot

    @property
    def info(self) -> CommitInfo | None:
        return next((a for a in self.actions if isinstance(a, CommitInfo)), None)

    @property
    def operation(self) -> str:
        info = self.info
        return info.operation if info else "an unknown operation"

    @property
    def said(self) -> str:
        return f"a concurrent {self.operation} committed version {self.version} of {self.snapshot.table_path}"

    def where(self, action: AddFile | RemoveFile) -> str:
        table, parts = self.snapshot.table_path, self.snapshot.partition_columns
        pv = _logical_values(self.snapshot, action.partitionValues or {})
        return f"partition {partition_dir(parts, pv)!r} of {table}" if parts and pv else table

    def raise_(self, error: type[ConcurrentModificationError], message: str) -> None:
        raise error(f"{self.said} {message}", winning_version=self.version, winning_operation=self.operation)

    def same_rows(self, path: str, rows: int) -> None:
        """Raise for a file whose rows both commits changed (`rows` of the same ones; 0 when the
        file's history rules out reconciling them)."""
        if not rows:
            self.raise_(ConcurrentDeleteDeleteException,
                        f"and changed {path}, whose rows this transaction also moves or changes in a way "
                        "row-level concurrency cannot reconcile (both compacted it, or its deletion vector "
                        "does not follow the one this transaction read). Retry the operation on the new version.")
        self.raise_(ConcurrentDeleteDeleteException,
                    f"and changed {rows} row{'s' if rows != 1 else ''} of {path} that this transaction also "
                    "changes (row-level concurrency lets two commits change different rows of a file, not "
                    "the same ones). Retry the operation on the new version.")


def check_winner(snapshot: Snapshot, winner_version: int, winner: list[Action], actions: list[Action],
                 read_set: ReadSet, isolation: str) -> list[Action]:
    """Raise the exception Delta's conflict checker raises for this winner, or return the
    actions to commit after it: these, or (row-level concurrency) these rebased on its marks."""
    won = _Winner(winner_version, winner, snapshot)
    _check_protocol_and_metadata(won)
    _check_app_ids(won, actions, read_set)
    _check_domains(won, actions, read_set)
    our_removes = {a.path for a in actions if isinstance(a, RemoveFile)}
    if read_set.empty and not our_removes:
        return actions  # a blind append conflicts with nothing but the checks above
    rows = _RowLevel.of(won, actions) if deletion_vectors_enabled(snapshot.configuration) else None
    _check_files(won, actions, read_set, isolation, our_removes, rows)
    return _rebase(won, actions, our_removes, rows) if rows is not None else actions


@dataclass(frozen=True)
class _RowLevel:
    """What row-level concurrency (tables with deletion vectors) makes of a winner: files it
    kept and marked rows of are not new data, and not a removal of what this transaction read;
    compactions that say where each input's rows went (skiplake.txn.row_placements) hold the
    same rows elsewhere."""
    theirs: dict[str, tuple[RemoveFile, AddFile | None]]   # files the winner removed (and re-added)
    marked: set[str]                     # files the winner kept and marked rows of
    dml_winner: bool                     # the winner is a DELETE, UPDATE or MERGE
    their_moves: dict[str, AnyPlacement]  # the winner compacted these (unless this transaction compacts too)
    our_moves: dict[str, AnyPlacement]   # this transaction compacts these
    taken: set[str]                      # inputs of this transaction's compaction the winner changed

    @staticmethod
    def of(won: _Winner, actions: list[Action]) -> "_RowLevel":
        snapshot, winner = won.snapshot, won.actions
        theirs = marked_paths(winner)
        marked = {p for p, (r, a) in theirs.items() if is_row_change(r, a)}
        ids = materialized_columns(snapshot.protocol, snapshot.configuration, snapshot.column_mapping)
        id_column = ids[0] if ids else None   # compactions that kept row ids say where rows went by them
        winner_moves = placements(winner, snapshot.table_path, id_column)
        # Two compactions of a file conflict, unless the loser recorded its order and the
        # winner did not (the loser then drops the winner's rows from its outputs): row ids
        # reconcile a compaction with DML only.
        against_compaction = is_rearrangement(winner)
        our_moves = placements(actions, snapshot.table_path, None if against_compaction else id_column)
        ordered_winner = placements(winner) if id_column is not None else winner_moves
        return _RowLevel(theirs, marked, won.operation in ROW_LEVEL_OPERATIONS,
                         winner_moves if not is_rearrangement(actions) else {}, our_moves,
                         set(our_moves) & set(theirs) if not ordered_winner else set())


def _check_files(won: _Winner, actions: list[Action], read_set: ReadSet, isolation: str, our_removes: set[str],
                 rows: _RowLevel | None) -> None:
    """The file-level checks: files the winner added that this transaction's reads would have
    seen, files it removed that this transaction read or removes too (less what row-level
    concurrency reconciles)."""
    marked = rows.marked if rows is not None else set()
    dml_winner = rows is not None and rows.dml_winner
    _check_added_files(won, actions, read_set, isolation, marked,
                       new_files_conflict=not (dml_winner and isolation == WRITE_SERIALIZABLE))
    # A rearrangement on such a table read only the files it rewrites: its outputs hold nothing else.
    reads = ReadSet(files=set(our_removes)) if rows is not None and is_rearrangement(actions) else read_set
    reconciled = marked | set(rows.their_moves) | rows.taken if rows is not None else set()
    _check_removed_files(won, reads, our_removes, reconciled)


def _rebase(won: _Winner, actions: list[Action], our_removes: set[str], rows: _RowLevel) -> list[Action]:
    """The row-level rebase: this transaction's actions on top of the winner's marks of the same
    files, and of compactions on either side."""
    table_path = won.snapshot.table_path
    ours = marked_paths(actions)
    both_marked = []
    for path in sorted((rows.marked & our_removes) - rows.taken):
        our_remove, our_add = ours[path]
        their_remove, their_add = rows.theirs[path]
        if not is_row_change(our_remove, our_add) or unique_id(our_remove.deletionVector) != unique_id(
                their_remove.deletionVector):
            won.raise_(ConcurrentDeleteDeleteException,
                       f"and marked rows of a file that this transaction rewrites or removes ({path} in "
                       f"{won.where(their_remove)}). Retry the operation on the new version.")
        both_marked.append(MarkedByBoth(path, our_remove, our_add, their_remove, their_add))
    if both_marked:
        actions = rebase(table_path, both_marked, actions, won.same_rows)
    if rows.their_moves and set(rows.their_moves) & our_removes:
        actions = rebase_onto_compaction(table_path, rows.their_moves, won.actions, actions, won.same_rows)
    if rows.taken:
        actions = rebase_compaction(table_path, rows.our_moves, won.actions, actions, won.same_rows)
    return actions


def _check_protocol_and_metadata(won: _Winner) -> None:
    if any(isinstance(a, Protocol) for a in won.actions):
        won.raise_(ProtocolChangedException,
                   "and changed the protocol version; this transaction read the old protocol. "
                   "Retry the operation on the new version.")
    if any(isinstance(a, Metadata) for a in won.actions):
        won.raise_(MetadataChangedException,
                   "and changed the table metadata (schema, partitioning or properties). "
                   "Retry the operation against the new metadata.")


def _check_app_ids(won: _Winner, actions: list[Action], read_set: ReadSet) -> None:
    ours = {a.appId for a in actions if isinstance(a, Txn)} | read_set.app_ids
    for a in won.actions:
        if isinstance(a, Txn) and a.appId in ours:
            won.raise_(ConcurrentTransactionException,
                       f"and wrote application transaction {a.appId!r} (version {a.version}), which this "
                       "transaction also writes. Two jobs with the same app id ran at once: give each its own.")


def _check_domains(won: _Winner, actions: list[Action], read_set: ReadSet) -> None:
    """Two commits that both write a metadata domain conflict, as in Delta; so does a winner that
    changed a domain this transaction acted on (an OPTIMIZE clustering by keys since replaced)."""
    theirs = {a.domain for a in won.actions if isinstance(a, DomainMetadata)}
    for a in actions:
        # (The row id high-water mark is no conflict: this commit's ids are assigned past the winner's.)
        if isinstance(a, DomainMetadata) and a.domain in theirs and a.domain != "delta.rowTracking":
            won.raise_(ConcurrentTransactionException,
                       f"and wrote metadata domain {a.domain!r}, which this transaction also writes. "
                       "Retry the operation on the new version.")
    for domain in sorted(read_set.domains & theirs):
        won.raise_(MetadataChangedException,
                   f"and changed metadata domain {domain!r} ({_DOMAIN_MEANING.get(domain, 'a table feature')}), "
                   "which this transaction acted on. Run it again on the new version.")


_DOMAIN_MEANING = {"delta.clustering": "the clustering columns", "delta.rowTracking": "the row id high-water mark"}


_BLIND_APPEND_HINT = " Under WriteSerializable (the default) a blind append like this one would not conflict."


def _check_added_files(won: _Winner, actions: list[Action], read_set: ReadSet, isolation: str,
                       marked: set[str], new_files_conflict: bool = True) -> None:
    """Files the winner added that this transaction's reads would have seen (not the files it
    logged again with more rows marked: they hold no new rows)."""
    winner_blind = bool(won.info and won.info.isBlindAppend)
    # A rearrangement adds no rows; WriteSerializable orders a blind append after this transaction.
    exempt = is_rearrangement(actions) or (isolation == WRITE_SERIALIZABLE and winner_blind)
    if exempt or not new_files_conflict:
        return
    seen = _maybe_seen(won, read_set, marked)
    if not seen or _no_row_matches(won.snapshot, seen, read_set):
        return
    hint = _BLIND_APPEND_HINT if winner_blind and isolation == SERIALIZABLE else ""
    won.raise_(ConcurrentAppendException,
               f"and added files to {won.where(seen[0])} that this transaction's read (isolation level "
               f"{isolation}) would have seen. Make the two operations touch disjoint partitions, or "
               "state the partition explicitly in the operation's condition (in MERGE, in the ON "
               f"clause).{hint}")


def _maybe_seen(won: _Winner, read_set: ReadSet, marked: set[str]) -> list[AddFile]:
    """The files the winner added whose partition values and stats cannot rule out this
    transaction's reads."""
    return [a for a in won.actions if isinstance(a, AddFile) and a.dataChange and a.path not in marked
            and (read_set.whole_table or _may_be_read(won.snapshot, a, read_set))]


def _may_be_read(snapshot: Snapshot, added: AddFile, read_set: ReadSet) -> bool:
    """Whether the added file's partition values and stats allow a row some read predicate matches."""
    schema, mode = snapshot.schema, snapshot.column_mapping
    stats: str | dict[str, Any] | None = added.stats
    if mode != "none" and added.stats:  # the log keys stats by physical names; reads name logical columns
        # Parsed with Decimal (as file_lookup parses): a float would round a decimal's bounds.
        stats = logical_stats(json.loads(added.stats, parse_float=Decimal), schema, mode)
    lookup = file_lookup(schema, _logical_values(snapshot, added.partitionValues), stats)
    return any(may_match(p, lookup) for p in read_set.predicates)


def _logical_values(snapshot: Snapshot, values: dict[str, str | None]) -> dict[str, str | None]:
    """A logged action's partition values (keyed by physical names with column mapping) keyed by
    the partition columns' logical names."""
    mode = snapshot.column_mapping
    if mode == "none" or not values:
        return values
    return logical_partition_values(values, snapshot.schema, snapshot.partition_columns, mode)


def _no_row_matches(snapshot: Snapshot, files: list[AddFile], read_set: ReadSet) -> bool:
    """Whether no row of the winner's added files satisfies any of this transaction's read
    predicates, the rows read exactly (skiplake.skipping.rows): then its reads would have seen
    nothing new, whatever the files' min/max said. A read of the whole table is matched by any
    row. False whenever that cannot be known cheaply and exactly: files past EXACT_CHECK_BYTES
    in all, with deletion vectors, under column mapping (physical names in the files), not
    local, or a predicate the row evaluator cannot evaluate as Spark does."""
    if read_set.whole_table or snapshot.column_mapping != "none" or any(f.deletionVector for f in files) or \
            sum(f.size for f in files) > EXACT_CHECK_BYTES:
        return False
    try:
        return not any(any_row(snapshot.table_path, files, snapshot.schema, snapshot.partition_columns, p)
                       for p in read_set.predicates)
    except (NotExact, OSError, pa.ArrowException, ValueError, ArithmeticError):
        return False  # (ValueError, ArithmeticError: a partition value another writer logged badly)


def _check_removed_files(won: _Winner, read_set: ReadSet, our_removes: set[str], marked: set[str]) -> None:
    for a in won.actions:
        if not isinstance(a, RemoveFile) or a.path in marked:
            continue
        if a.path in read_set.files or read_set.whole_table:
            won.raise_(ConcurrentDeleteReadException,
                       f"and removed a file that this transaction read ({a.path} in {won.where(a)}). Retry the "
                       "operation; to avoid this, let concurrent operations touch disjoint partitions.")
        if a.path in our_removes:
            won.raise_(ConcurrentDeleteDeleteException,
                       f"and removed a file that this transaction also removes ({a.path} in {won.where(a)}). "
                       "Retry the operation on the new version.")
