"""Delta log actions as plain records, with the protocol's own names.

Each action serialises to one JSON line `{"<actionName>": {...}}` of a commit file, and back.
Fields the protocol marks optional are omitted from the JSON when they are None.
"""
from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Iterable, Mapping, Union

from skiplake.log.schema import Schema

NUM_RECORDS_PATTERN = r'"numRecords"\s*:\s*(?P<n>\d+)'
_NUM_RECORDS = re.compile(NUM_RECORDS_PATTERN)


def now_ms() -> int:
    """The current time in milliseconds since the epoch, as the log's timestamps count it."""
    return int(time.time() * 1000)


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


@dataclass(frozen=True)
class Protocol:
    """The protocol action: the reader and writer versions a table needs, and the features it lists
    (readerFeatures from reader version 3, writerFeatures from writer version 7)."""
    minReaderVersion: int = 1
    minWriterVersion: int = 2
    readerFeatures: tuple[str, ...] | None = None
    writerFeatures: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """The action's JSON object, as it sits under "protocol" in a commit file."""
        return _drop_none({
            "minReaderVersion": self.minReaderVersion,
            "minWriterVersion": self.minWriterVersion,
            "readerFeatures": list(self.readerFeatures) if self.readerFeatures is not None else None,
            "writerFeatures": list(self.writerFeatures) if self.writerFeatures is not None else None,
        })

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Protocol":
        """The action from its JSON object; FieldError when a field is missing or of another type."""
        rf = _field(d, "protocol", "readerFeatures", list)
        wf = _field(d, "protocol", "writerFeatures", list)
        return Protocol(_field(d, "protocol", "minReaderVersion", int, required=True),
                        _field(d, "protocol", "minWriterVersion", int, required=True),
                        _names(rf, "protocol.readerFeatures"), _names(wf, "protocol.writerFeatures"))


@dataclass(frozen=True)
class Format:
    """The `format` of a metaData action: the data files' provider (`parquet`) and its options."""
    provider: str = "parquet"
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Metadata:
    """The metaData action: the table's id, schema (schemaString), partition columns, properties
    (configuration), name, description and creation time."""
    id: str
    schemaString: str
    partitionColumns: tuple[str, ...] = ()
    configuration: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    description: str | None = None
    format: Format = field(default_factory=Format)
    createdTime: int | None = None

    @staticmethod
    def new(schema: Schema, partition_columns: list[str], configuration: dict[str, str],
            name: str | None = None, description: str | None = None) -> "Metadata":
        """A new table's metaData: a fresh UUID for id, `schema` as schemaString, createdTime now."""
        return Metadata(id=str(uuid.uuid4()), schemaString=schema.json_string(),
                        partitionColumns=tuple(partition_columns), configuration=dict(configuration),
                        name=name, description=description, createdTime=now_ms())

    @cached_property
    def schema(self) -> Schema:
        # Parsed once: planning asks for it per reference and per filter.
        """The schema schemaString holds; raises when it is not a Delta schema (see problems())."""
        return Schema.from_json(self.schemaString)

    def to_json(self) -> dict[str, Any]:
        # name/description are written as explicit nulls, as Delta writers do.
        """The action's JSON object, as it sits under "metaData" in a commit file."""
        return {
            "id": self.id, "name": self.name, "description": self.description,
            "format": {"provider": self.format.provider, "options": dict(self.format.options)},
            "schemaString": self.schemaString, "partitionColumns": list(self.partitionColumns),
            "configuration": dict(self.configuration), "createdTime": self.createdTime,
        }

    def problems(self) -> list[str]:
        """What makes this metaData unusable as a table's (empty when it is usable). from_json
        takes what the log holds as it is: a later commit may replace a metaData action, and only
        the one in force has to be whole (a Delta Live Tables table's first one has no schema)."""
        out = []
        if not isinstance(self.id, str):
            out.append(f"metaData.id is {_shown(self.id)}, not a string")
        if not isinstance(self.schemaString, str):
            out.append(f"metaData.schemaString is {_shown(self.schemaString)}, not a string")
        else:
            try:
                self.schema
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                out.append(f"metaData.schemaString is not a Delta schema ({type(e).__name__}: {e})")
        if not all(isinstance(c, str) for c in self.partitionColumns):
            out.append(f"metaData.partitionColumns is {_shown(list(self.partitionColumns))}, not a list of names")
        # from_json keeps the log's map as it is: its keys and values may be anything here
        entries: Iterable[tuple[object, object]] = self.configuration.items()
        if not all(isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in entries):
            out.append("metaData.configuration holds a key or value that is not a string")
        return out

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Metadata":
        """The action from its JSON object. FieldError for a malformed partitionColumns, configuration,
        format or createdTime; id and schemaString are taken as they are (see problems())."""
        fmt = _field(d, "metaData", "format", dict, default={})
        return Metadata(
            id=d.get("id"), schemaString=d.get("schemaString"),  # type: ignore[arg-type]  # see problems()
            partitionColumns=tuple(_field(d, "metaData", "partitionColumns", list, default=[])),
            configuration=dict(_field(d, "metaData", "configuration", dict, default={})),
            name=d.get("name"), description=d.get("description"),
            format=Format(str(fmt.get("provider") or "parquet"),
                          dict(_field(fmt, "metaData.format", "options", dict, default={}))),
            createdTime=_field(d, "metaData", "createdTime", int),
        )


@dataclass(frozen=True)
class AddFile:
    """An add action: a data file of the table, with its partition values, size, stats and deletion vector."""
    path: str  # URI-encoded, relative to the table root (or absolute)
    partitionValues: dict[str, str | None]
    size: int
    modificationTime: int
    dataChange: bool = True
    stats: str | None = None
    tags: Mapping[str, str | None] | None = None   # values as the log holds them: null is read as is
    deletionVector: dict[str, Any] | None = None
    clusteringProvider: str | None = None   # set on the files a clustering implementation wrote
    # Row tracking: the row id of the file's first row, and the version that added the file.
    baseRowId: int | None = None
    defaultRowCommitVersion: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The action's JSON object, as it sits under "add" in a commit file."""
        return _drop_none({
            "path": self.path, "partitionValues": dict(self.partitionValues), "size": self.size,
            "modificationTime": self.modificationTime, "dataChange": self.dataChange,
            "stats": self.stats, "tags": self.tags, "deletionVector": self.deletionVector,
            "clusteringProvider": self.clusteringProvider, "baseRowId": self.baseRowId,
            "defaultRowCommitVersion": self.defaultRowCommitVersion,
        })

    @staticmethod
    def from_json(d: dict[str, Any]) -> "AddFile":
        """The action from its JSON object; FieldError for a missing path or size, or a field of another type."""
        return AddFile(_field(d, "add", "path", str, required=True),
                       _string_map(d, "add", "partitionValues") or {},
                       _field(d, "add", "size", int, required=True),
                       _field(d, "add", "modificationTime", int, default=0),
                       _field(d, "add", "dataChange", bool, default=True),
                       _field(d, "add", "stats", str), _string_map(d, "add", "tags"),
                       _field(d, "add", "deletionVector", dict), _field(d, "add", "clusteringProvider", str),
                       _field(d, "add", "baseRowId", int), _field(d, "add", "defaultRowCommitVersion", int))

    def remove(self, timestamp: int | None = None, data_change: bool = True) -> "RemoveFile":
        """The remove action that takes this file out of the table at `timestamp` (now by default), with
        extendedFileMetadata: the add's partition values, size, tags, deletion vector and row ids."""
        return RemoveFile(self.path, timestamp if timestamp is not None else now_ms(), data_change,
                          True, dict(self.partitionValues), self.size, self.tags, self.deletionVector,
                          self.baseRowId, self.defaultRowCommitVersion)

    @property
    def num_records(self) -> int | None:
        """numRecords of the file's stats; None without stats, or stats without it."""
        if not self.stats:
            return None
        # A regex, not json.loads: reports count rows over every file of large tables.
        m = _NUM_RECORDS.search(self.stats)
        return int(m.group(1)) if m else None


@dataclass(frozen=True)
class RemoveFile:
    """A remove action: a data file (path and deletion vector) taken out of the table; a tombstone until
    the retention period ends."""
    path: str
    deletionTimestamp: int | None = None
    dataChange: bool = True
    extendedFileMetadata: bool | None = None
    partitionValues: dict[str, str | None] | None = None
    size: int | None = None
    tags: Mapping[str, str | None] | None = None   # values as the log holds them: null is read as is
    deletionVector: dict[str, Any] | None = None
    baseRowId: int | None = None                 # the removed add's, kept (row tracking)
    defaultRowCommitVersion: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The action's JSON object, as it sits under "remove" in a commit file."""
        return _drop_none({
            "path": self.path, "deletionTimestamp": self.deletionTimestamp, "dataChange": self.dataChange,
            "extendedFileMetadata": self.extendedFileMetadata, "partitionValues": self.partitionValues,
            "size": self.size, "tags": self.tags, "deletionVector": self.deletionVector,
            "baseRowId": self.baseRowId, "defaultRowCommitVersion": self.defaultRowCommitVersion,
        })

    @staticmethod
    def from_json(d: dict[str, Any]) -> "RemoveFile":
        """The action from its JSON object; FieldError for a missing path, or a field of another type."""
        return RemoveFile(_field(d, "remove", "path", str, required=True),
                          _field(d, "remove", "deletionTimestamp", int),
                          _field(d, "remove", "dataChange", bool, default=True),
                          _field(d, "remove", "extendedFileMetadata", bool),
                          _string_map(d, "remove", "partitionValues"), _field(d, "remove", "size", int),
                          _string_map(d, "remove", "tags"), _field(d, "remove", "deletionVector", dict),
                          _field(d, "remove", "baseRowId", int), _field(d, "remove", "defaultRowCommitVersion", int))


@dataclass(frozen=True)
class AddCDCFile:
    """A file of change data (`_change_data/`): rows a commit changed, each with `_change_type`.
    Never part of the table's state; only change feed readers read it."""
    path: str
    partitionValues: dict[str, str | None]
    size: int
    dataChange: bool = False
    tags: Mapping[str, str | None] | None = None   # values as the log holds them: null is read as is

    def to_json(self) -> dict[str, Any]:
        """The action's JSON object, as it sits under "cdc" in a commit file."""
        return _drop_none({"path": self.path, "partitionValues": dict(self.partitionValues), "size": self.size,
                           "dataChange": self.dataChange, "tags": self.tags})

    @staticmethod
    def from_json(d: dict[str, Any]) -> "AddCDCFile":
        """The action from its JSON object; FieldError for a missing path or size, or a field of another type."""
        return AddCDCFile(_field(d, "cdc", "path", str, required=True),
                          _string_map(d, "cdc", "partitionValues") or {},
                          _field(d, "cdc", "size", int, required=True),
                          _field(d, "cdc", "dataChange", bool, default=False), _string_map(d, "cdc", "tags"))


@dataclass(frozen=True)
class DomainMetadata:
    """The configuration of a named metadata domain. Domains named `delta.*` belong to table
    features (clustering keys, the row id high-water mark); the latest action per domain wins,
    and `removed=True` deletes the domain."""
    domain: str
    configuration: str
    removed: bool = False

    def to_json(self) -> dict[str, Any]:
        """The action's JSON object, as it sits under "domainMetadata" in a commit file."""
        return {"domain": self.domain, "configuration": self.configuration, "removed": self.removed}

    @staticmethod
    def from_json(d: dict[str, Any]) -> "DomainMetadata":
        """The action from its JSON object; FieldError for a missing domain or configuration, or a field
        of another type."""
        return DomainMetadata(_field(d, "domainMetadata", "domain", str, required=True),
                              _field(d, "domainMetadata", "configuration", str, required=True),
                              _field(d, "domainMetadata", "removed", bool, default=False))


@dataclass(frozen=True)
class Txn:
    """A txn action: the latest version of application `appId` committed to the table (idempotent writes)."""
    appId: str
    version: int
    lastUpdated: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The action's JSON object, as it sits under "txn" in a commit file."""
        return _drop_none({"appId": self.appId, "version": self.version, "lastUpdated": self.lastUpdated})

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Txn":
        """The action from its JSON object; FieldError for a missing appId or version, or a field of another type."""
        return Txn(_field(d, "txn", "appId", str, required=True), _field(d, "txn", "version", int, required=True),
                   _field(d, "txn", "lastUpdated", int))


@dataclass(frozen=True)
class CommitInfo:
    """Provenance of a commit. Free-form in the protocol; these are the fields Delta writers use."""
    timestamp: int
    operation: str
    operationParameters: dict[str, Any] = field(default_factory=dict)
    readVersion: int | None = None
    isolationLevel: str | None = None
    isBlindAppend: bool | None = None
    operationMetrics: dict[str, str] | None = None
    engineInfo: str | None = None
    txnId: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        # Delta writers store operationParameters values as JSON-encoded strings.
        """The action's JSON object, as it sits under "commitInfo" in a commit file, `extra` merged in."""
        params = {k: v if isinstance(v, str) else json.dumps(v) for k, v in self.operationParameters.items()}
        d = _drop_none({
            "timestamp": self.timestamp, "operation": self.operation, "operationParameters": params,
            "readVersion": self.readVersion, "isolationLevel": self.isolationLevel,
            "isBlindAppend": self.isBlindAppend, "operationMetrics": self.operationMetrics,
            "engineInfo": self.engineInfo, "txnId": self.txnId,
        })
        d.update(self.extra)
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> "CommitInfo":
        """The action from its JSON object, taken leniently (commitInfo is free-form): no timestamp is 0,
        no operation UNKNOWN, and the fields not modelled are kept in `extra`."""
        known = {"timestamp", "operation", "operationParameters", "readVersion", "isolationLevel",
                 "isBlindAppend", "operationMetrics", "engineInfo", "txnId"}
        return CommitInfo(
            timestamp=int(d.get("timestamp") or 0), operation=str(d.get("operation") or "UNKNOWN"),
            operationParameters=dict(d.get("operationParameters") or {}),
            readVersion=d.get("readVersion"), isolationLevel=d.get("isolationLevel"),
            isBlindAppend=d.get("isBlindAppend"), operationMetrics=d.get("operationMetrics"),
            engineInfo=d.get("engineInfo"), txnId=d.get("txnId"),
            extra={k: v for k, v in d.items() if k not in known},
        )


Action = Union[Protocol, Metadata, AddFile, RemoveFile, AddCDCFile, DomainMetadata, Txn, CommitInfo]

_NAMES: dict[type, str] = {
    Protocol: "protocol", Metadata: "metaData", AddFile: "add", RemoveFile: "remove",
    AddCDCFile: "cdc", DomainMetadata: "domainMetadata", Txn: "txn", CommitInfo: "commitInfo",
}
_PARSERS: dict[str, Callable[[dict[str, Any]], Action]] = {
    "protocol": Protocol.from_json, "metaData": Metadata.from_json, "add": AddFile.from_json,
    "remove": RemoveFile.from_json, "cdc": AddCDCFile.from_json, "domainMetadata": DomainMetadata.from_json,
    "txn": Txn.from_json, "commitInfo": CommitInfo.from_json,
}


class FieldError(ValueError):
    """A field of a log action that is missing, or of another type than the protocol's."""


_KINDS = {str: "a string", int: "an integer", bool: "a boolean", list: "a list", dict: "an object"}


def _field(d: dict[str, Any], action: str, name: str, kind: type, required: bool = False,
           default: Any = None) -> Any:
    """Field `name` of an action's JSON object, checked to be of `kind` (or absent)."""
    if not isinstance(d, dict):
        raise FieldError(f"{action} is {_shown(d)}, not an object")
    value = d.get(name)
    if value is None:
        if required:
            raise FieldError(f"{action}.{name} is missing (null)")
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise FieldError(f"{action}.{name} is {_shown(value)}, not {_KINDS[kind]}")
    return value


def _names(values: list | None, where: str) -> tuple[str, ...] | None:
    if values is None:
        return None
    if not all(isinstance(v, str) for v in values):
        raise FieldError(f"{where} is {_shown(values)}, not a list of names")
    return tuple(values)


def _string_map(d: dict[str, Any], action: str, name: str) -> dict[str, str | None] | None:
    """A map field (partitionValues, tags): string keys to string or null values; None if absent."""
    value = _field(d, action, name, dict)
    if value is None:
        return None
    if not all(isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in value.items()):
        raise FieldError(f"{action}.{name} is {_shown(value)}, not a map of strings")
    return dict(value)


def _shown(value: Any) -> str:
    return "missing (null)" if value is None else f"{type(value).__name__} {value!r}"[:80]


def action_to_line(action: Action) -> str:
    """The action as its line of a commit file, `{"<actionName>": {...}}` in compact JSON (no newline)."""
    return json.dumps({_NAMES[type(action)]: action.to_json()}, separators=(",", ":"))


def encode_commit(actions: list[Action]) -> bytes:
    """The bytes of a commit file: one line per action, UTF-8, each ending with a newline."""
    return ("\n".join(action_to_line(a) for a in actions) + "\n").encode("utf-8")


def parse_action(obj: dict[str, Any]) -> Action | None:
    """One decoded JSON line to an action; None for actions this reader does not model (checkpointMetadata…)."""
    for key, parser in _PARSERS.items():
        if key in obj:
            if not isinstance(obj[key], dict):
                raise FieldError(f"{key} is {_shown(obj[key])}, not an object")
            return parser(obj[key])
    return None
