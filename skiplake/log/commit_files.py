"""Writing a commit: put-if-absent of the next version, and the storage side of the retry loop.

The log decides nothing about conflicts. When the version this commit wanted was taken, each
winning commit's actions go to the caller's `check_winner`, which raises if they conflict with
this transaction (skiplake.txn holds those rules); when none does, the commit moves on to the
next free version.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Callable, Sequence

from skiplake.errors import CommitFailedError, TableAlreadyExistsError
from skiplake.log.actions import Action, CommitInfo, Metadata, Protocol, encode_commit, now_ms
from skiplake.log.checkpoint import checkpoint_interval, write_checkpoint
from skiplake.log.cleanup import clean_expired_log
from skiplake.log.snapshot import Snapshot, commit_name, log_storage, read_commit
from skiplake.version import __version__

log = logging.getLogger("skiplake.commit")

ENGINE_INFO = f"skiplake/{__version__}"

# Called with (winning version, its actions); raises to abort this commit, or returns the
# actions to commit after that winner (None: the same).
WinnerCheck = Callable[[int, list[Action]], "list[Action] | None"]
# Called with (the version an attempt writes, the actions): the actions as that version holds
# them (row ids and commit versions depend on it).
AtVersion = Callable[[int, list[Action]], list[Action]]


@dataclass(frozen=True)
class CommitResult:
    """A written commit: its version, the attempts it took, whether a checkpoint was written after it,
    and its actions."""
    version: int
    attempts: int
    checkpointed: bool
    actions: tuple = ()  # the actions committed (rebased past winners, where they were)


def put_commit(snapshot: Snapshot, info: CommitInfo, actions: list[Action],
               check_winner: WinnerCheck | None = None, max_attempts: int = 10_000,
               at_version: AtVersion | None = None) -> CommitResult:
    """Write `info` and `actions` as the next version after `snapshot`, retrying past winners
    that `check_winner` accepts. `info.timestamp` is stamped at each attempt, and `at_version`
    gives the actions as the attempt's version holds them."""
    storage = snapshot.storage
    attempt = snapshot.version + 1
    winners: list[tuple[int, list[Action]]] = []  # read while checking: a checkpoint replays them
    for attempts in range(1, max_attempts + 1):
        stamped = dataclasses.replace(info, timestamp=now_ms())
        written = at_version(attempt, actions) if at_version is not None else actions
        if storage.put_if_absent(commit_name(attempt), encode_commit([stamped, *written])):
            own = (attempt, [stamped, *written])
            return CommitResult(attempt, attempts, _maybe_checkpoint(snapshot, attempt, [*winners, own]),
                                tuple(written))
        v = attempt
        while storage.exists(commit_name(v)):
            if check_winner is not None:
                winner = read_commit(storage, v)
                winners.append((v, winner))
                rebased = check_winner(v, winner)
                # An empty list is an answer: every action rebased away (a compaction whose rows
                # a winner deleted), not "unchanged".
                actions = actions if rebased is None else rebased
            v += 1
        log.info("version %d was taken; no conflict with versions %d..%d, retrying at %d",
                 attempt, attempt, v - 1, v)
        attempt = v
    raise CommitFailedError(f"gave up committing to {snapshot.table_path} after {max_attempts} attempts")


def _maybe_checkpoint(snapshot: Snapshot, version: int, commits: list[tuple[int, list[Action]]]) -> bool:
    if version == 0 or version % checkpoint_interval(snapshot) != 0:
        return False
    try:
        # Every commit since the snapshot is at hand when the winners were read for the conflict
        # check; otherwise (blind retries) the version is loaded.
        contiguous = [v for v, _ in commits] == list(range(snapshot.version + 1, version + 1))
        fresh = (snapshot.advanced(commits) if contiguous
                 else Snapshot.load(snapshot.table_path, version, snapshot.storage))
        written = write_checkpoint(snapshot.storage, fresh)
    except Exception as e:  # the commit stands; a missing checkpoint only slows later loads
        log.warning("checkpoint at version %d of %s failed: %s", version, snapshot.table_path, e)
        return False
    try:
        clean_expired_log(snapshot.table_path, fresh.configuration, snapshot.storage)
    except Exception as e:  # the commit and its checkpoint stand; cleanup runs again next time
        log.warning("log cleanup of %s failed: %s", snapshot.table_path, e)
    return written


def put_first_commit(table_path: str, info: CommitInfo, protocol: Protocol, metadata: Metadata,
                     actions: Sequence[Action] | None = None) -> Snapshot:
    """Write version 0. Exactly one of several concurrent creators wins; the others get
    TableAlreadyExistsError and nothing of theirs is written."""
    storage = log_storage(table_path)
    if not storage.put_if_absent(commit_name(0), encode_commit([info, protocol, metadata, *(actions or [])])):
        raise TableAlreadyExistsError(table_path)
    return Snapshot.load(table_path, 0, storage)
