"""A streaming read of a table, as Delta's streaming source defines it, without Spark.

The stream first reads the table's snapshot at its starting version (its files ordered by
modification time, then path), then each later commit's added data files in commit order. An
offset is (version, index, initial): the last file delivered, `initial` when that version's files
are the starting snapshot's rather than a commit's. Index -1 is "before the version's first file".

Commits that change no data (`dataChange: false`: OPTIMIZE, clustering) deliver nothing. A commit
that removes data stops the stream (StreamSourceChangedError) unless `ignoreDeletes` (a commit
that only deletes passes) or `skipChangeCommits` (any commit that removes data passes, its added
files too). With `readChangeFeed` the stream delivers the change feed instead: the snapshot as
inserts, then each commit's changes (skiplake.log.changes)."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Mapping

from skiplake.errors import InvalidArgumentError, StreamSourceChangedError
from skiplake.log.actions import Action, AddCDCFile, AddFile, Metadata, RemoveFile
from skiplake.log.changes import INSERT, commit_times, plan_changes, versions_between
from skiplake.log.schema import Schema
from skiplake.log.snapshot import Snapshot, add_files_from_arrow, list_log, log_storage, read_commit

DEFAULT_MAX_FILES = 1000


@dataclass(frozen=True)
class StreamOffset:
    """A position in the stream: the last unit delivered (see the module)."""
    version: int
    index: int
    initial: bool = False

    @property
    def key(self) -> tuple[int, int, int]:
        """What offsets are ordered by: a version's snapshot comes before its later commits."""
        return self.version, 0 if self.initial else 1, self.index

    def to_json(self) -> dict[str, Any]:
        """The offset as Spark's checkpoint stores it (Delta's field names)."""
        return {"sourceVersion": 1, "reservoirVersion": self.version, "index": self.index,
                "isStartingVersion": self.initial}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "StreamOffset":
        """The offset of its JSON."""
        return StreamOffset(int(d["reservoirVersion"]), int(d["index"]), bool(d.get("isStartingVersion", False)))


@dataclass(frozen=True)
class StreamOptions:
    """A streaming read's options, as delta-spark names them."""
    starting_version: int | str | None = None     # a version, or "latest"
    starting_timestamp: str | None = None
    max_files: int | None = DEFAULT_MAX_FILES
    max_bytes: int | None = None
    ignore_deletes: bool = False
    skip_change_commits: bool = False
    read_change_feed: bool = False

    @staticmethod
    def parse(options: Mapping[str, str]) -> "StreamOptions":
        """The options of a `readStream` (names case-insensitive); a bad value is an InvalidArgumentError."""
        o = {k.lower(): v for k, v in options.items()}
        version: int | str | None = o.get("startingversion")
        if version is not None and str(version).lower() != "latest":
            version = _int(version, "startingVersion", 0)
        if version is not None and o.get("startingtimestamp") is not None:
            raise InvalidArgumentError("give startingVersion or startingTimestamp, not both")
        max_files = _int(o["maxfilespertrigger"], "maxFilesPerTrigger", 1) if "maxfilespertrigger" in o else DEFAULT_MAX_FILES
        return StreamOptions(
            starting_version=version.lower() if isinstance(version, str) else version,
            starting_timestamp=o.get("startingtimestamp"), max_files=max_files,
            max_bytes=_bytes(o["maxbytespertrigger"]) if "maxbytespertrigger" in o else None,
            ignore_deletes=_flag(o.get("ignoredeletes")), skip_change_commits=_flag(o.get("skipchangecommits")),
            read_change_feed=_flag(o.get("readchangefeed")) or _flag(o.get("readchangedata")))


def _flag(text: str | None) -> bool:
    return str(text).strip().lower() == "true"


def _int(text: Any, name: str, least: int) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        value = least - 1
    if value < least:
        raise InvalidArgumentError(f"the option {name} must be a whole number of {least} or more, not {text!r}")
    return value


_UNITS = {"b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30}


def _bytes(text: str) -> int:
    t = str(text).strip().lower()
    digits = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = t[len(digits):] or "b"
    if not digits.isdigit() or unit not in _UNITS or int(digits) < 1:
        raise InvalidArgumentError(f"the option maxBytesPerTrigger must be a size such as 10g or 512m, not {text!r}")
    return int(digits) * _UNITS[unit]


@dataclass(frozen=True)
class StreamUnit:
    """One file (or the changed rows of one) a micro-batch reads."""
    version: int
    index: int
    file: AddFile | AddCDCFile
    change_type: str | None = None        # readChangeFeed: the rows' change type (None: in the file)
    rows: tuple[int, ...] | None = None   # only these row indexes of the file (a change by deletion vector)
    timestamp_ms: int = 0

    @property
    def size(self) -> int:
        """The file's size in bytes."""
        return self.file.size


class StreamPlanner:
    """The units of a table's stream between offsets (kept per version, for the query's life)."""

    def __init__(self, table_path: str, options: StreamOptions, schema: Schema) -> None:
        """The planner for a stream of the table at `table_path` with `options`, delivering rows of
        `schema` (the table's when the query started)."""
        self.path = table_path
        self.options = options
        self.schema = schema
        self.storage = log_storage(table_path)
        self._units: OrderedDict[tuple[int, bool], list[StreamUnit]] = OrderedDict()

    def latest_version(self) -> int:
        """The table's latest version."""
        latest = list_log(self.storage).latest
        assert latest is not None
        return latest

    def initial_offset(self) -> StreamOffset:
        """Where the stream starts: before the starting version's commit, or before the snapshot."""
        o = self.options
        if o.starting_version == "latest":
            return StreamOffset(self.latest_version() + 1, -1)
        if isinstance(o.starting_version, int):
            return StreamOffset(o.starting_version, -1)
        if o.starting_timestamp is not None:
            start, _ = versions_between(self.path, o.starting_timestamp, None, list_log(self.storage))
            assert start is not None
            return StreamOffset(start, -1)
        return StreamOffset(self.latest_version(), -1, initial=True)

    def next_offset(self, start: StreamOffset) -> StreamOffset:
        """The offset after the units the next micro-batch takes from `start`, within the read
        limits (at least one unit); `start` itself when there is nothing new."""
        taken = files = size = 0
        end = start
        latest = self.latest_version()
        version, initial = start.version, start.initial
        while version <= latest:
            for unit in self.units(version, initial):
                if unit.index <= (start.index if (version, initial) == (start.version, start.initial) else -1):
                    continue
                if taken and self._full(files + 1, size + unit.size):
                    return end
                taken, files, size = taken + 1, files + 1, size + unit.size
                end = StreamOffset(version, unit.index, initial)
            if initial:
                initial = False
            version += 1
        # Past every unit: the next version's commit, not yet made, is where the stream waits.
        return end if taken else start

    def _full(self, files: int, size: int) -> bool:
        o = self.options
        return (o.max_files is not None and files > o.max_files) or (o.max_bytes is not None and size > o.max_bytes)

    def units_between(self, start: StreamOffset, end: StreamOffset) -> list[StreamUnit]:
        """Every unit after `start` up to `end`, both as next_offset made them."""
        out: list[StreamUnit] = []
        if end.key <= start.key:
            return out
        version, initial = start.version, start.initial
        while (version, not initial) <= (end.version, not end.initial):
            for unit in self.units(version, initial):
                after_start = (version, initial) != (start.version, start.initial) or unit.index > start.index
                before_end = (version, initial) != (end.version, end.initial) or unit.index <= end.index
                if after_start and before_end:
                    out.append(unit)
            if initial:
                initial = False
            version += 1
        return out

    def units(self, version: int, initial: bool) -> list[StreamUnit]:
        """The units of a version: its snapshot's files when `initial`, else its commit's."""
        key = (version, initial)
        if key not in self._units:
            self._units[key] = self._snapshot_units(version) if initial else self._commit_units(version)
            while len(self._units) > 64:
                self._units.popitem(last=False)
        return self._units[key]

    def _snapshot_units(self, version: int) -> list[StreamUnit]:
        snapshot = Snapshot.load(self.path, version, storage=self.storage)
        files = sorted(add_files_from_arrow(snapshot.files), key=lambda f: (f.modificationTime, f.path))
        change = INSERT if self.options.read_change_feed else None
        return [StreamUnit(version, i, f, change) for i, f in enumerate(files)]

    def _commit_units(self, version: int) -> list[StreamUnit]:
        actions = read_commit(self.storage, version)
        self._check_schema(version, actions)
        removes = [a for a in actions if isinstance(a, RemoveFile) and a.dataChange]
        adds = [a for a in actions if isinstance(a, AddFile) and a.dataChange]
        if self.options.read_change_feed:
            return self._change_units(version)
        if removes:
            if self.options.skip_change_commits or (self.options.ignore_deletes and not adds):
                return []
            raise StreamSourceChangedError(
                self.path, version, "removes data (a DELETE, UPDATE, MERGE or overwrite)",
                "Set the option skipChangeCommits to true to skip such commits (ignoreDeletes: only commits that "
                "only delete), or start a new stream with a new checkpoint.")
        return [StreamUnit(version, i, f) for i, f in enumerate(adds)]

    def _change_units(self, version: int) -> list[StreamUnit]:
        plan = plan_changes(self.path, version, version, storage=self.storage)
        vc = plan.versions[0]
        ts = vc.timestamp_ms
        found: list[tuple[AddFile | AddCDCFile, str | None, tuple[int, ...] | None]] = []
        found += [(f, None, None) for f in vc.change_files]
        found += [(f, INSERT, None) for f in vc.inserted]
        found += [(f, "delete", None) for f in vc.deleted]
        found += [(f, "delete", tuple(int(r) for r in rows)) for f, rows in vc.rows_deleted]
        found += [(f, INSERT, tuple(int(r) for r in rows)) for f, rows in vc.rows_inserted]
        return [StreamUnit(version, i, f, kind, rows, ts) for i, (f, kind, rows) in enumerate(found)]

    def commit_times(self) -> dict[int, int]:
        """Each version's commit time (milliseconds), as the change feed gives it: one listing of the log."""
        return commit_times(list_log(self.storage))

    def _check_schema(self, version: int, actions: list[Action]) -> None:
        metadata = next((a for a in actions if isinstance(a, Metadata)), None)
        if metadata is None:
            return
        new = {f.name.lower(): f for f in metadata.schema.fields}
        for f in self.schema.fields:
            now = new.get(f.name.lower())
            if now is None or now.type != f.type:
                raise StreamSourceChangedError(
                    self.path, version, f"changes the schema in a way that is not additive (column {f.name})",
                    "Restart the query with a new checkpoint to read the table with its new schema.")
