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
from typing import Any, Union

from skiplake.log.schema import Schema

NUM_RECORDS_PATTERN = r'"numRecords"\s*:\s*(?P<n>\d+)'
_NUM_RECORDS = re.compile(NUM_RECORDS_PATTERN)


def now_ms() -> int:
    return int(time.time() * 1000)


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


@dataclass(frozen=True)
class Protocol:
    minReaderVersion: int = 1
    minWriterVersion: int = 2
    readerFeatures: tuple[str, ...] | None = None
    writerFeatures: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return _drop_none({
            "minReaderVersion": self.minReaderVersion,
            "minWriterVersion": self.minWriterVersion,
            "readerFeatures": list(self.readerFeatures) if self.readerFeatures is not None else None,
            "writerFeatures": list(self.writerFeatures) if self.writerFeatures is not None else None,
        })

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Protocol":
        rf, wf = d.get("readerFeatures"), d.get("writerFeatures")
        return Protocol(int(d["minReaderVersion"]), int(d["minWriterVersion"]),
                        tuple(rf) if rf is not None else None, tuple(wf) if wf is not None else None)


@dataclass(frozen=True)
class Format:
    provider: str = "parquet"
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Metadata:
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
        return Metadata(id=str(uuid.uuid4()), schemaString=schema.json_string(),
                        partitionColumns=tuple(partition_columns), configuration=dict(configuration),
                        name=name, description=description, createdTime=now_ms())

    @cached_property
    def schema(self) -> Schema:
        # Parsed once: planning asks for it per reference and per filter.
        return Schema.from_json(self.schemaString)

    def to_json(self) -> dict[str, Any]:
        # name/description are written as explicit nulls, as Delta writers do.
        return {
            "id": self.id, "name": self.name, "description": self.description,
            "format": {"provider": self.format.provider, "options": dict(self.format.options)},
            "schemaString": self.schemaString, "partitionColumns": list(self.partitionColumns),
            "configuration": dict(self.configuration), "createdTime": self.createdTime,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Metadata":
        fmt = d.get("format") or {}
        return Metadata(
            id=d["id"], schemaString=d["schemaString"],
            partitionColumns=tuple(d.get("partitionColumns") or ()),
            configuration=dict(d.get("configuration") or {}),
            name=d.get("name"), description=d.get("description"),
            format=Format(fmt.get("provider", "parquet"), dict(fmt.get("options") or {})),
            createdTime=d.get("createdTime"),
        )


@dataclass(frozen=True)
class AddFile:
    path: str  # URI-encoded, relative to the table root (or absolute)
    partitionValues: dict[str, str | None]
    size: int
    modificationTime: int
    dataChange: bool = True
    stats: str | None = None
    tags: dict[str, str] | None = None
    deletionVector: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return _drop_none({
            "path": self.path, "partitionValues": dict(self.partitionValues), "size": self.size,
            "modificationTime": self.modificationTime, "dataChange": self.dataChange,
            "stats": self.stats, "tags": self.tags, "deletionVector": self.deletionVector,
        })

    @staticmethod
    def from_json(d: dict[str, Any]) -> "AddFile":
        return AddFile(d["path"], dict(d.get("partitionValues") or {}), int(d["size"]),
                       int(d.get("modificationTime") or 0), bool(d.get("dataChange", True)),
                       d.get("stats"), d.get("tags"), d.get("deletionVector"))

    def remove(self, timestamp: int | None = None, data_change: bool = True) -> "RemoveFile":
        return RemoveFile(self.path, timestamp if timestamp is not None else now_ms(), data_change,
                          True, dict(self.partitionValues), self.size, self.tags, self.deletionVector)

    @property
    def num_records(self) -> int | None:
        if not self.stats:
            return None
        # A regex, not json.loads: reports count rows over every file of large tables.
        m = _NUM_RECORDS.search(self.stats)
        return int(m.group(1)) if m else None


@dataclass(frozen=True)
class RemoveFile:
    path: str
    deletionTimestamp: int | None = None
    dataChange: bool = True
    extendedFileMetadata: bool | None = None
    partitionValues: dict[str, str | None] | None = None
    size: int | None = None
    tags: dict[str, str] | None = None
    deletionVector: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return _drop_none({
            "path": self.path, "deletionTimestamp": self.deletionTimestamp, "dataChange": self.dataChange,
            "extendedFileMetadata": self.extendedFileMetadata, "partitionValues": self.partitionValues,
            "size": self.size, "tags": self.tags, "deletionVector": self.deletionVector,
        })

    @staticmethod
    def from_json(d: dict[str, Any]) -> "RemoveFile":
        return RemoveFile(d["path"], d.get("deletionTimestamp"), bool(d.get("dataChange", True)),
                          d.get("extendedFileMetadata"), d.get("partitionValues"), d.get("size"),
                          d.get("tags"), d.get("deletionVector"))


@dataclass(frozen=True)
class Txn:
    appId: str
    version: int
    lastUpdated: int | None = None

    def to_json(self) -> dict[str, Any]:
        return _drop_none({"appId": self.appId, "version": self.version, "lastUpdated": self.lastUpdated})

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Txn":
        return Txn(d["appId"], int(d["version"]), d.get("lastUpdated"))


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


Action = Union[Protocol, Metadata, AddFile, RemoveFile, Txn, CommitInfo]

_NAMES: dict[type, str] = {
    Protocol: "protocol", Metadata: "metaData", AddFile: "add", RemoveFile: "remove",
    Txn: "txn", CommitInfo: "commitInfo",
}
_PARSERS = {
    "protocol": Protocol.from_json, "metaData": Metadata.from_json, "add": AddFile.from_json,
    "remove": RemoveFile.from_json, "txn": Txn.from_json, "commitInfo": CommitInfo.from_json,
}


def action_to_line(action: Action) -> str:
    return json.dumps({_NAMES[type(action)]: action.to_json()}, separators=(",", ":"))


def encode_commit(actions: list[Action]) -> bytes:
    return ("\n".join(action_to_line(a) for a in actions) + "\n").encode("utf-8")


def parse_action(obj: dict[str, Any]) -> Action | None:
    """One decoded JSON line to an action; None for actions this reader does not model (cdc, domainMetadata…)."""
    for key, parser in _PARSERS.items():
        if key in obj:
            return parser(obj[key])
    return None
