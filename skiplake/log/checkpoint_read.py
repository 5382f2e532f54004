"""Reading a checkpoint into a table's state: its protocol, metadata, transactions and file actions.

Three kinds are read, as PROTOCOL.md names them:
- classic (`n.checkpoint.parquet`) and multi-part (`n.checkpoint.o.p.parquet`) V1 checkpoints,
  one action per row in struct columns;
- V2 checkpoints, UUID-named (`n.checkpoint.<uuid>.json` or `.parquet`) or classic-named, which
  hold one `checkpointMetadata` action and keep their add and remove actions either inline or in
  sidecar files (`_delta_log/_sidecars/*.parquet`) that `sidecar` actions name.

Every malformed part (an unreadable file, a null required field, a row of another type) is a
CorruptLogError naming the file: the caller then falls back to an older state.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from skiplake.errors import CheckpointRemovedError, CorruptLogError
from skiplake.log.actions import AddFile, DomainMetadata, Metadata, Protocol, RemoveFile, Txn, parse_action
from skiplake.log.arrow_schema import FILES_SCHEMA, STRING_MAP, TOMBSTONES_SCHEMA, map_items
from skiplake.log.parquet_actions import ActionReadError, ParquetActions, action_rows, read_actions
from skiplake.log.storage import Storage

SIDECAR_DIR = "_sidecars"
# Checkpoint and sidecar files fetched at once (object stores answer requests in parallel).
_FETCHES = 8
# A checkpoint of fewer rows reads its adds' JSON stats at load even with typed stats beside
# them: they cost little, and a snapshot that holds them does not depend on the checkpoint
# still being there when they are needed.
DEFER_STATS_MIN_ROWS = 100_000


@dataclass(frozen=True)
class CheckpointState:
    """What a checkpoint holds: the protocol, metaData, txns and live domains, and its add and remove
    actions as Arrow tables."""
    protocol: Protocol | None
    metadata: Metadata | None
    txns: dict[str, Txn]
    adds: pa.Table       # FILES_SCHEMA
    removes: pa.Table    # TOMBSTONES_SCHEMA
    sidecars: tuple[str, ...] = ()   # names under the log folder, e.g. _sidecars/<uuid>.parquet
    parsed_stats: TypedStats | None = None   # the adds' typed stats, where written
    domains: tuple[DomainMetadata, ...] = ()  # live metadata domains
    # The adds' JSON stats were left unread (null in `adds`): parsed_stats.json_stats has them.
    stats_deferred: bool = False


def read_checkpoint(storage: Storage, names: list[str], defer_stats: bool = False) -> CheckpointState:
    """The state a checkpoint holds (`names`: its one file, or every part of a multi-part one).

    With `defer_stats`, the adds' JSON stats are not read when every file holding them has typed
    stats too (`stats_deferred`): at millions of files they are most of the checkpoint, and
    planning reads the typed ones."""
    if len(names) == 1 and names[0].endswith(".json"):
        state = _json_checkpoint(storage, names[0])
    else:
        state = _parquet_checkpoint(storage, names, defer_stats)
    if not state.sidecars:
        return state
    if state.stats_deferred and state.adds.num_rows:
        # Adds inline besides sidecars keep their stats: deferred rows are the sidecars' only.
        state = _parquet_checkpoint(storage, names)
    adds, removes = [state.adds], [state.removes]
    defer = defer_stats and not state.adds.num_rows
    read = _read_files(storage, list(state.sidecars), defer_stats=defer)
    for name, sidecar in zip(state.sidecars, read):
        adds.append(struct_rows(sidecar.column("add"), FILES_SCHEMA))
        removes.append(struct_rows(sidecar.column("remove"), TOMBSTONES_SCHEMA))
        _check_file_actions(storage.where(name), adds[-1], removes[-1])
    schemas = [r.schema for r in read]
    return CheckpointState(state.protocol, state.metadata, state.txns, pa.concat_tables(adds),
                           pa.concat_tables(removes), state.sidecars,
                           _typed_stats(storage, list(state.sidecars), schemas), state.domains,
                           defer and _stats_left(read))


@dataclass(frozen=True)
class CheckpointHead:
    """What a Parquet checkpoint holds besides its file actions, and where its adds are: read
    from the files' footers and the columns of the other actions only, so that a checkpoint of
    millions of files can be put aside for a Spark job to read."""
    protocol: Protocol | None
    metadata: Metadata | None
    txns: dict[str, Txn]
    domains: tuple[DomainMetadata, ...]
    groups: tuple[tuple[str, int, int], ...]   # (file under the log folder, row group, adds in it)

    @property
    def adds(self) -> int:
        """The add actions the checkpoint holds (its sidecars' included)."""
        return sum(count for _, _, count in self.groups)


def read_checkpoint_head(storage: Storage, names: list[str]) -> CheckpointHead | None:
    """The head of the Parquet checkpoint `names` (its one file or its parts); None for a JSON
    checkpoint, or when a footer does not say how many adds a row group holds."""
    if any(name.endswith(".json") for name in names):
        return None
    columns: dict[str, list[pa.Array]] = {}
    footers: dict[str, pq.FileMetaData] = {}
    for name in names:
        footer, table = _head_rows(storage, name)
        footers[name] = footer
        for column in table.column_names:
            columns.setdefault(column, []).extend(table.column(column).chunks)
    chunked = {k: pa.chunked_array(v) for k, v in columns.items() if v}
    try:
        protocol, metadata, txns = _singletons(chunked)
        sidecars = _sidecar_names(_rows(chunked.get("sidecar")))
        domains = tuple(DomainMetadata.from_json(r) for r in _rows(chunked.get("domainMetadata")))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CorruptLogError(storage.where(names[0]), f"a protocol, metaData, txn, domainMetadata or sidecar row is "
                                                       f"malformed ({type(e).__name__}: {e})") from None
    with ThreadPoolExecutor(min(len(sidecars), _FETCHES) or 1) as pool:
        footers.update(zip(sidecars, pool.map(lambda name: _footer_of(storage, name), sidecars)))
    groups: list[tuple[str, int, int]] = []
    for name, footer in footers.items():
        held = action_rows(footer, "add") if "add" in footer.schema.to_arrow_schema().names else []
        if held is None:
            return None
        groups += [(name, group, count) for group, count in held]
    return CheckpointHead(protocol, metadata, txns, domains, tuple(groups))


def _head_rows(storage: Storage, name: str) -> tuple[pq.FileMetaData, pa.Table]:
    """A checkpoint file's footer and its rows of other actions than add and remove, read from
    the row groups whose statistics say they hold some (all, where they say nothing)."""
    with _reading(storage, name), storage.open_input(name) as source:
        parquet = pq.ParquetFile(source)
        footer = parquet.metadata
        wanted = [n for n in parquet.schema_arrow.names if n not in ("add", "remove")]
        paths = [i for i in range(footer.num_columns)
                 if footer.schema.column(i).path.split(".")[0] in wanted]
        groups = [g for g in range(footer.num_row_groups) if _holds_any(footer.row_group(g), paths)]
        table = parquet.read_row_groups(groups, columns=wanted, use_threads=False) if groups \
            else parquet.schema_arrow.empty_table().select(wanted)
    return footer, table


def _holds_any(group: pq.RowGroupMetaData, columns: list[int]) -> bool:
    """Whether a row group may have a value in one of `columns` (leaf columns by index)."""
    for i in columns:
        stats = group.column(i).statistics
        if stats is None or not stats.has_null_count or stats.null_count < group.num_rows:
            return True
    return False


def _footer_of(storage: Storage, name: str) -> pq.FileMetaData:
    with _reading(storage, name), storage.open_input(name) as source:
        return pq.ParquetFile(source).metadata


@dataclass(frozen=True)
class GroupAdds:
    """The adds of some row groups of one checkpoint file (a task's share of a large checkpoint)."""
    rows: pa.Table                  # FILES_SCHEMA
    typed: TypedStats | None        # their typed stats, when the file has them
    stats_unread: bool              # their JSON stats were left in the file (typed.json_stats has them)


def read_add_groups(storage: Storage, name: str, groups: tuple[int, ...]) -> GroupAdds:
    """The adds of row groups `groups` of checkpoint (or sidecar) file `name`: with typed stats,
    their JSON stats are left unread (TypedStats of just those groups reads them back)."""
    with _reading(storage, name), storage.open_input(name) as source:   # one footer read for both
        parquet = pq.ParquetFile(source)
        schema = parquet.schema_arrow
        fields = _typed_fields(schema)
        unread = bool(fields) and "stats" in _add_fields(schema)
        columns = [c for c in _untyped_columns(schema, without_stats=unread) if c == "add" or c.startswith("add.")]
        adds = _group_adds(parquet, groups, columns)
    rows = pa.concat_tables([_flattened(a, FILES_SCHEMA) for a in adds]) if adds else FILES_SCHEMA.empty_table()
    return GroupAdds(rows, TypedStats(storage, [name], fields, {name: groups}) if fields else None, unread)


def _group_adds(parquet: pq.ParquetFile, groups: tuple[int, ...], columns: list[str]) -> list[pa.StructArray]:
    """The add rows of row groups `groups` of an open file, `columns` of them, a chunk per group."""
    if not groups:
        return []
    table = parquet.read_row_groups(list(groups), columns=columns, use_threads=False)
    return [_valid_rows(chunk) for chunk in table.column("add").chunks if len(chunk)]


class TypedStats:
    """A checkpoint's typed stats (`add.stats_parsed`), read from its files only for the columns
    planning asks for: a snapshot load reads none of them."""

    def __init__(self, storage: Storage, names: list[str], fields: frozenset[str],
                 groups: dict[str, tuple[int, ...]] | None = None) -> None:
        """The typed stats of the adds in the Parquet files `names` (only those of the row groups
        `groups` gives a file, when given), each with typed min, max and null count of the
        columns `fields`."""
        self.storage = storage
        self.names = names      # the Parquet files holding the adds: the checkpoint or its sidecars
        self.fields = fields    # the columns every file has typed min, max and null count of
        self.groups = groups    # a task's share of a large checkpoint: some row groups of each file
        self._footers: dict[str, pq.FileMetaData] = {}

    def read(self, keys: list[str]) -> pa.ChunkedArray:
        """Every add's stats_parsed with numRecords and the `keys` columns, in the checkpoint's
        order, a chunk per row group (joining 10M rows of nested structs costs more than the
        caller's pick of a few leaves)."""
        columns = ["add.stats_parsed.numRecords"]
        columns += [f"add.stats_parsed.{part}.{k}" for part in ("minValues", "maxValues", "nullCount") for k in keys]
        chunks = [pc.struct_field(adds, "stats_parsed") for adds in self._adds(columns)]
        return pa.chunked_array(chunks) if chunks else pa.chunked_array([], pa.struct([]))

    def paths(self) -> pa.Array:
        """Every add's path, in the checkpoint's order (the order of read's rows)."""
        chunks = [pc.struct_field(adds, "path") for adds in self._adds(["add.path"])]
        return pa.concat_arrays(chunks) if chunks else pa.array([], pa.string())

    def json_stats(self, rows: np.ndarray | None = None) -> pa.ChunkedArray:
        """The JSON stats (`add.stats`) of the adds at positions `rows` of the checkpoint's order
        (None: every add)."""
        return self.add_field("stats", pa.string(), rows)

    def add_field(self, field: str, type_: pa.DataType, rows: np.ndarray | None = None) -> pa.ChunkedArray:
        """The field `field` of the adds (`stats`, or `stats_parsed` of the type field_type
        gives) at positions `rows` of the checkpoint's order (None: every add). For some adds,
        only the row groups holding them are read, by ranged reads after the footers, when the
        footers say which hold them."""
        located = self._locate(rows) if rows is not None else None
        if located is None:
            # Chunked: the strings of millions of files overflow one array's 32-bit offsets.
            every = pa.chunked_array([pc.struct_field(a, field) for a in self._adds([f"add.{field}"])], type_)
            return every if rows is None else every.take(pa.array(rows, pa.int64()))
        jobs, offsets = located

        def read(job: tuple[str, pq.FileMetaData, int]) -> pa.Array:
            name, footer, group = job
            with _reading(self.storage, name), self.storage.open_input(name) as source:
                table = pq.ParquetFile(source, metadata=footer).read_row_group(group, columns=[f"add.{field}"],
                                                                               use_threads=False)
            return pc.struct_field(_valid_rows(table.column("add").combine_chunks()), field)

        with ThreadPoolExecutor(min(len(jobs), _FETCHES) or 1) as pool:
            chunks = list(pool.map(read, jobs))
        return pa.chunked_array(chunks, type_).take(pa.array(offsets, pa.int64()))

    def field_type(self, field: str) -> pa.DataType | None:
        """The type of the adds' field `field` when every file gives it the same one; None when
        a file lacks it or the files differ."""
        types = set()
        for name in self.names:
            add = self._footer(name).schema.to_arrow_schema().field("add").type
            types.add(add.field(field).type if add.get_field_index(field) >= 0 else None)
        return types.pop() if len(types) == 1 else None

    def _footer(self, name: str) -> pq.FileMetaData:
        footer = self._footers.get(name)
        if footer is None:
            footer = self._footers[name] = _footer_of(self.storage, name)
        return footer

    def _locate(self, rows: np.ndarray) -> tuple[list[tuple[str, pq.FileMetaData, int]], np.ndarray] | None:
        """From the files' footers alone: the row groups (file, footer, group) holding the adds at
        `rows`, and those adds' positions among the adds of just those groups. None when a footer
        does not say how many adds a group holds."""
        groups: list[tuple[str, pq.FileMetaData, int, int]] = []   # every group holding adds, with its count
        for name in self.names:
            footer = self._footer(name)
            held = action_rows(footer, "add")
            if held is None:
                return None
            mine = self.groups.get(name, ()) if self.groups is not None else None
            groups += [(name, footer, g, count) for g, count in held if mine is None or g in mine]
        sizes = np.array([g[3] for g in groups], np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)])
        index = np.searchsorted(starts, rows, side="right") - 1   # each row's group
        used = np.unique(index)
        # A row's position among the rows of the used groups only: its offset in its group plus
        # the rows of the used groups before it.
        before = np.concatenate([[0], np.cumsum(sizes[used])])
        offsets = rows - starts[index] + before[np.searchsorted(used, index)]
        return [groups[i][:3] for i in used.tolist()], offsets

    def _group_adds(self, name: str, columns: list[str]) -> list[pa.StructArray]:
        groups = (self.groups or {}).get(name, ())
        if not groups:
            return []
        with _reading(self.storage, name), self.storage.open_input(name) as source:
            return _group_adds(pq.ParquetFile(source, metadata=self._footer(name)), groups, columns)

    def _adds(self, columns: list[str]) -> list[pa.StructArray]:
        """The add rows of the files, `columns` of them, a chunk per row group that holds some."""
        if self.groups is not None:
            return [struct for name in self.names for struct in self._group_adds(name, columns)]
        read = _read_files(self.storage, self.names, lambda _schema: columns, frozenset({"add"}))
        return [_valid_rows(chunk) for r in read for chunk in r.chunks.get("add", [])]


def _typed_fields(schema: pa.Schema) -> frozenset[str] | None:
    """The columns a file's add.stats_parsed has min, max and null count of (None: no typed stats)."""
    if "add" not in schema.names:
        return None
    add = schema.field("add").type
    if add.get_field_index("stats_parsed") < 0:
        return None
    stats = add.field("stats_parsed").type
    parts = [stats.field(k).type for k in ("minValues", "maxValues", "nullCount") if stats.get_field_index(k) >= 0]
    if len(parts) < 3 or stats.get_field_index("numRecords") < 0:
        return frozenset()
    return frozenset.intersection(*(frozenset(f.name for f in p) for p in parts))


def _typed_stats(storage: Storage, names: list[str], schemas: list[pa.Schema]) -> TypedStats | None:
    fields = [_typed_fields(s) for s in schemas]
    present = [f for f in fields if f is not None]
    if not fields or len(present) < len(fields):
        return None
    return TypedStats(storage, names, frozenset.intersection(*present))


def _defers(schemas: list[pa.Schema]) -> bool:
    """Whether the adds of files of these schemas can leave their JSON stats unread: every file
    has typed stats of some column."""
    return bool(schemas) and all(_typed_fields(s) for s in schemas)


def _stats_left(read: list[ParquetActions]) -> bool:
    """Whether these files' adds were read without the JSON stats they have."""
    chunks = [c for r in read for c in r.chunks.get("add", [])]
    return bool(chunks) and all("stats" in _add_fields(r.schema) for r in read) and \
        all(c.type.get_field_index("stats") < 0 for c in chunks)


@contextmanager
def _reading(storage: Storage, name: str) -> Iterator[None]:
    """Errors reading checkpoint file `name` as CorruptLogErrors naming it."""
    try:
        yield
    except FileNotFoundError:
        raise CorruptLogError(storage.where(name), "the checkpoint names this file, and it does not exist") from None
    except (pa.ArrowException, OSError) as e:
        raise CorruptLogError(storage.where(name), f"the checkpoint cannot be read ({e})") from None


@contextmanager
def still_there(storage: Storage, names: Iterable[str]) -> Iterator[None]:
    """A read of checkpoint files `names` loaded before: its CorruptLogError becomes a
    CheckpointRemovedError when log cleanup has removed one of them since."""
    try:
        yield
    except CorruptLogError:
        gone = [name for name in names if not storage.exists(name)]
        if gone:
            raise CheckpointRemovedError(storage.where(gone[0])) from None
        raise


def _parquet_file(storage: Storage, name: str) -> tuple[bytes | pa.Buffer, pq.ParquetFile]:
    with _reading(storage, name):
        data = _whole_file(storage, name)
        return data, pq.ParquetFile(pa.BufferReader(data))


def _whole_file(storage: Storage, name: str) -> bytes | pa.Buffer:
    """A checkpoint file's bytes. A local file is memory-mapped: only the pages of the columns
    read are touched, never copied (a checkpoint of 10M files is 0.7 GB, of which a plan reads a
    few columns); checkpoints are written once and never changed in place. An object store's
    file is fetched whole, in one request."""
    path = storage.local_path(name)
    if path is None:
        return storage.read(name)
    with pa.memory_map(path) as mapped:
        return mapped.read_buffer()


def _read_files(storage: Storage, names: list[str], columns: Callable[[pa.Schema], list[str]] | None = None,
                actions: frozenset[str] | None = None, defer_stats: bool = False) -> list[ParquetActions]:
    """The action columns of checkpoint or sidecar files `names`, fetched and read in parallel;
    by default every column but the typed stats and partition values (TypedStats reads those
    when planning asks), and with `defer_stats` but the JSON stats too when every file has typed
    ones (`_defers`)."""
    if not names:
        return []
    with ThreadPoolExecutor(min(len(names), _FETCHES)) as pool:
        opened = list(pool.map(lambda name: _parquet_file(storage, name), names))
    if columns is None:
        without_stats = defer_stats and _defers([f.schema_arrow for _, f in opened]) and \
            sum(f.metadata.num_rows for _, f in opened) >= DEFER_STATS_MIN_ROWS
        columns = lambda schema: _untyped_columns(schema, without_stats)   # noqa: E731
    try:
        return read_actions([d for d, _ in opened], [f for _, f in opened], columns, actions)
    except ActionReadError as e:
        raise CorruptLogError(storage.where(names[e.index]), f"the checkpoint cannot be read ({e})") from None


def sidecars_of(storage: Storage, names: list[str]) -> tuple[str, ...]:
    """The sidecar files a checkpoint names, without reading its file actions."""
    if len(names) == 1 and names[0].endswith(".json"):
        return _json_checkpoint(storage, names[0]).sidecars
    found: list[str] = []
    for name, read in zip(names, _read_files(storage, names, actions=frozenset({"sidecar"}))):
        try:
            found += _sidecar_names(_rows(read.column("sidecar")))
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptLogError(storage.where(name), f"the checkpoint's sidecars cannot be read ({e})") from None
    return tuple(found)


def _untyped_columns(schema: pa.Schema, without_stats: bool = False) -> list[str]:
    """Every column of a checkpoint file but add's typed stats and partition values (and its
    JSON stats, `without_stats`)."""
    typed = {"stats_parsed", "partitionValues_parsed"} | ({"stats"} if without_stats else set())
    if not typed & set(_add_fields(schema)):
        return list(schema.names)
    return [n for n in schema.names if n != "add"] + [f"add.{n}" for n in _add_fields(schema) if n not in typed]


def _add_fields(schema: pa.Schema) -> list[str]:
    return [f.name for f in schema.field("add").type] if "add" in schema.names else []


def _parquet_checkpoint(storage: Storage, names: list[str], defer_stats: bool = False) -> CheckpointState:
    read = _read_files(storage, names, defer_stats=defer_stats)
    columns = {action: pa.chunked_array([c for r in read for c in r.chunks.get(action, [])])
               for action in {a for r in read for a in r.chunks}}
    where = storage.where(names[0])
    try:
        protocol, metadata, txns = _singletons(columns)
        sidecars = _sidecar_names(r for r in _rows(columns.get("sidecar")))
        domains = tuple(DomainMetadata.from_json(r) for r in _rows(columns.get("domainMetadata")))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CorruptLogError(where, f"a protocol, metaData, txn, domainMetadata or sidecar row is malformed "
                                     f"({type(e).__name__}: {e})") from None
    adds, removes = struct_rows(columns.get("add"), FILES_SCHEMA), struct_rows(columns.get("remove"), TOMBSTONES_SCHEMA)
    _check_file_actions(where, adds, removes)
    typed = _typed_stats(storage, names, [r.schema for r in read]) if not sidecars else None
    deferred = defer_stats and _stats_left(read)
    return CheckpointState(protocol, metadata, txns, adds, removes, sidecars, typed, domains, deferred)


def _json_checkpoint(storage: Storage, name: str) -> CheckpointState:
    """A UUID-named V2 checkpoint in JSON: one action per line, like a commit file."""
    where = storage.where(name)
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    txns: dict[str, Txn] = {}
    adds: list[AddFile] = []
    removes: list[RemoveFile] = []
    domains: list[DomainMetadata] = []
    sidecar_rows: list[object] = []   # as the log holds them; _sidecar_names checks each
    for obj in _json_objects(storage, name):
        if "sidecar" in obj:
            sidecar_rows.append(obj["sidecar"])
            continue
        try:
            action = parse_action(obj)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise CorruptLogError(where, str(e)) from None
        if isinstance(action, AddFile):
            adds.append(action)
        elif isinstance(action, RemoveFile):
            removes.append(action)
        elif isinstance(action, Protocol):
            protocol = action
        elif isinstance(action, Metadata):
            metadata = action
        elif isinstance(action, Txn):
            txns[action.appId] = action
        elif isinstance(action, DomainMetadata):
            domains.append(action)
    try:
        sidecars = _sidecar_names(sidecar_rows)
    except (KeyError, TypeError, ValueError) as e:
        raise CorruptLogError(where, f"a sidecar action is malformed ({e})") from None
    return CheckpointState(protocol, metadata, txns, actions_to_arrow(adds, FILES_SCHEMA),
                           actions_to_arrow(removes, TOMBSTONES_SCHEMA), sidecars, domains=tuple(domains))


def _json_objects(storage: Storage, name: str) -> list[dict]:
    where = storage.where(name)
    try:
        data = storage.read(name)
    except FileNotFoundError:
        raise CorruptLogError(where, "the checkpoint does not exist") from None
    return [obj for _, obj in json_lines(where, data)]


def json_lines(where: str, data: bytes) -> list[tuple[int, dict]]:
    """(line number, object) of each JSON object of a log file, one per line (blank lines
    skipped); anything else is a CorruptLogError naming the line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptLogError(where, f"the file is not UTF-8 text ({e})") from None
    out: list[tuple[int, dict]] = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise CorruptLogError(where, f"line {i} is not valid JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(obj, dict):
            raise CorruptLogError(where, f"line {i} is not a JSON object")
        out.append((i, obj))
    return out


def _sidecar_names(rows: Iterable[object]) -> tuple[str, ...]:
    """Where each sidecar is, under the log folder. The protocol keeps every sidecar in
    `_delta_log/_sidecars`; a path with folders in it is read by its file name there."""
    names = []
    for row in rows:
        path = row["path"] if isinstance(row, dict) else None
        if not isinstance(path, str) or not path:
            raise ValueError(f"sidecar.path is {path!r}, not a file name")
        names.append(f"{SIDECAR_DIR}/{unquote(path).rstrip('/').rsplit('/', 1)[-1]}")
    return tuple(names)


def _rows(col: pa.ChunkedArray | None) -> list[dict]:
    """The non-null rows of an action column (None: the checkpoint has none) as dictionaries."""
    if col is None:
        return []
    return col.filter(col.is_valid()).to_pylist()


def _singletons(columns: dict[str, pa.ChunkedArray]) -> tuple[Protocol | None, Metadata | None, dict[str, Txn]]:
    protocol = metadata = None
    txns: dict[str, Txn] = {}
    for row in _rows(columns.get("protocol")):
        protocol = Protocol.from_json(row)
    for row in _rows(columns.get("metaData")):
        row = dict(row)
        row["configuration"] = dict(row.get("configuration") or [])
        fmt = dict(row.get("format") or {})
        fmt["options"] = dict(fmt.get("options") or [])
        row["format"] = fmt
        metadata = Metadata.from_json(row)
    for row in _rows(columns.get("txn")):
        t = Txn.from_json(row)
        txns[t.appId] = t
    return protocol, metadata, txns


def _check_file_actions(where: str, adds: pa.Table, removes: pa.Table) -> None:
    """A checkpoint's file actions carry the fields the protocol requires of them."""
    for action, rows, fields in (("add", adds, ("path", "size")), ("remove", removes, ("path",))):
        for name in fields:
            missing = rows.column(name).null_count
            if missing:
                raise CorruptLogError(where, f"{action}.{name} is missing (null) in {missing} of {rows.num_rows} rows")


def struct_rows(column: pa.ChunkedArray | None, schema: pa.Schema) -> pa.Table:
    """The non-null rows of a checkpoint's struct column (None: the checkpoint has none), flattened
    to `schema` (missing fields null). Chunk by chunk: the column may hold more than one array can
    (millions of files)."""
    if column is None:
        return schema.empty_table()
    parts = [_flattened(chunk, schema) for chunk in column.chunks]
    parts = [p for p in parts if p.num_rows]
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _flattened(chunk: pa.Array, schema: pa.Schema) -> pa.Table:
    col = _valid_rows(chunk)
    columns = []
    for fld in schema:
        idx = col.type.get_field_index(fld.name)
        if idx < 0:
            columns.append(pa.nulls(len(col), fld.type))
            continue
        columns.append(_conform(pc.struct_field(col, [idx]), fld.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _valid_rows(col: pa.Array) -> pa.Array:
    """The non-null rows of a checkpoint column. Writers group each action's rows together, so
    they are usually one run: a zero-copy slice then, not a copy of every string."""
    if col.null_count == 0:
        return col
    count = len(col) - col.null_count
    if not count:
        return col.slice(0, 0)
    # Arrow compute, not NumPy: turning an Arrow boolean array into NumPy imports pandas (2 s).
    valid = col.is_valid()
    first = pc.index(valid, True).as_py()
    if pc.all(valid.slice(first, count)).as_py():
        return col.slice(first, count)
    return col.filter(valid)


def _conform(array: pa.Array, type_: pa.DataType) -> pa.Array:
    """`array` as `type_`; a struct field by field name, fields it lacks null, extra ones dropped
    (delta-spark's deletionVector struct has maxRowIndex besides the protocol's fields)."""
    if array.type == type_:
        return array
    if pa.types.is_struct(type_) and pa.types.is_struct(array.type):
        children = []
        for fld in type_:
            idx = array.type.get_field_index(fld.name)
            children.append(pa.nulls(len(array), fld.type) if idx < 0
                            else _conform(pc.struct_field(array, [idx]), fld.type))
        return pa.StructArray.from_arrays(children, fields=list(type_), mask=array.is_null())
    return array.cast(type_)


def actions_to_arrow(actions: Iterable[AddFile] | Iterable[RemoveFile], schema: pa.Schema) -> pa.Table:
    """Add actions as FILES_SCHEMA rows, or remove actions as TOMBSTONES_SCHEMA rows: each column
    is the action's field of that name, a map field as the map's items."""
    listed: list[AddFile | RemoveFile] = list(actions)

    def column(f: pa.Field) -> list:
        values = [getattr(a, f.name) for a in listed]
        return [map_items(v) for v in values] if f.type == STRING_MAP else values
    return pa.Table.from_pydict({f.name: column(f) for f in schema}, schema=schema)
