"""Table features a table's properties turn on, and the protocol they need.

`delta.enableDeletionVectors=true` needs the reader-writer feature `deletionVectors`, which
exists only with table features: reader version 3, writer version 7. Upgrading an older table
lists explicitly every feature its old writer version implied, as PROTOCOL.md asks (a reader
of a (3,7) table knows only what the lists say), exactly as delta-spark does: a (1,2) table
becomes (3,7) with appendOnly, invariants and deletionVectors. `delta.columnMapping.mode` =
`name` or `id` likewise needs the reader-writer feature `columnMapping` (skiplake writes it at
(3,7), never at the legacy (2,5), whose tables it reads only). `delta.enableChangeDataFeed`
needs the writer-only feature `changeDataFeed`: a (1,2) table becomes (1,7) with appendOnly,
invariants and changeDataFeed, and a (3,7) one lists it among its writer features (a table
whose properties ask for a feature its protocol lacks is one delta-spark refuses to open).
A CHECK constraint (`delta.constraints.<name>`) likewise needs the writer feature
`checkConstraints`, a generated column (`delta.generationExpression` in its metadata)
`generatedColumns`, and an identity column (`delta.identity.*`) `identityColumns`. Clustering
is no property: `cluster_by` asks for the writer features `clustering` and `domainMetadata`.
`delta.enableRowTracking` needs `rowTracking` and `domainMetadata`, and a collated string column
(`__COLLATIONS` in its metadata) `collations-preview` and `domainMetadata`.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from skiplake.log.actions import Protocol
from skiplake.log.column_mapping import FEATURE as COLUMN_MAPPING
from skiplake.log.column_mapping import requested_mode
from skiplake.log.schema import COLLATIONS_KEY, Schema

ENABLE_DELETION_VECTORS = "delta.enableDeletionVectors"
ENABLE_CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
ENABLE_ROW_TRACKING = "delta.enableRowTracking"
ROW_TRACKING = "rowTracking"
DOMAIN_METADATA = "domainMetadata"
CHANGE_DATA_FEED = "changeDataFeed"
CONSTRAINT_PREFIX = "delta.constraints."   # one property per CHECK constraint: its SQL expression
CHECK_CONSTRAINTS = "checkConstraints"
GENERATION_EXPRESSION = "delta.generationExpression"   # a column's metadata: its SQL expression
GENERATED_COLUMNS = "generatedColumns"
IDENTITY_START = "delta.identity.start"           # a column's metadata: it is an identity column
IDENTITY_COLUMNS = "identityColumns"
DELETION_VECTORS = "deletionVectors"
V2_CHECKPOINT = "v2Checkpoint"
COLLATIONS = "collations-preview"
CHECKPOINT_POLICY = "delta.checkpointPolicy"   # "v2" asks for V2 checkpoints, "classic" (default) not
# The writer features a legacy writer version implies (each includes the ones before it).
_LEGACY_WRITER = {
    2: ("appendOnly", "invariants"),
    3: ("checkConstraints",),
    4: ("changeDataFeed", "generatedColumns"),
    5: ("columnMapping",),
    6: ("identityColumns",),
}


def flag(configuration: Mapping[str, str], key: str) -> bool:
    """Whether a boolean table property is true (absent means false; case and spaces ignored)."""
    return str(configuration.get(key, "false")).strip().lower() == "true"


def deletion_vectors_enabled(configuration: Mapping[str, str]) -> bool:
    """Whether writers may add deletion vectors (readers apply them whenever the feature is on)."""
    return flag(configuration, ENABLE_DELETION_VECTORS)


def change_data_feed_enabled(configuration: Mapping[str, str]) -> bool:
    """Whether writers must record change data (`_change_data` files where a commit rewrites rows)."""
    return flag(configuration, ENABLE_CHANGE_DATA_FEED)


def supports(protocol: Protocol, feature: str) -> bool:
    """Whether the protocol lists `feature` as both a reader and a writer feature (a legacy protocol,
    which lists none, supports none here)."""
    return feature in (protocol.readerFeatures or ()) and feature in (protocol.writerFeatures or ())


def wanted_features(configuration: Mapping[str, str]) -> list[str]:
    """The reader-writer features the table's properties turn on."""
    wanted = [DELETION_VECTORS] if deletion_vectors_enabled(configuration) else []
    if requested_mode(configuration) != "none":
        wanted.append(COLUMN_MAPPING)
    if str(configuration.get(CHECKPOINT_POLICY, "classic")).strip().lower() == "v2":
        wanted.append(V2_CHECKPOINT)
    return wanted


def wanted_writer_features(configuration: Mapping[str, str], schema: Schema | None = None) -> list[str]:
    """The writer-only features the table's properties (and its columns' metadata) turn on."""
    wanted = [CHANGE_DATA_FEED] if change_data_feed_enabled(configuration) else []
    if any(k.startswith(CONSTRAINT_PREFIX) for k in configuration):
        wanted.append(CHECK_CONSTRAINTS)
    if schema is not None and any(GENERATION_EXPRESSION in f.metadata for f in schema.fields):
        wanted.append(GENERATED_COLUMNS)
    if schema is not None and any(IDENTITY_START in f.metadata for f in schema.fields):
        wanted.append(IDENTITY_COLUMNS)
    if flag(configuration, ENABLE_ROW_TRACKING):
        wanted += [ROW_TRACKING, DOMAIN_METADATA]
    if schema is not None and has_collations(schema):
        wanted += [COLLATIONS, DOMAIN_METADATA]
    return wanted


def has_collations(schema: Schema) -> bool:
    """Whether a column of `schema` (at any depth) is a collated string."""
    def walk(node: object) -> bool:
        if isinstance(node, dict):
            if COLLATIONS_KEY in (node.get("metadata") or {}):
                return True
            return any(walk(v) for v in node.values())
        if isinstance(node, list):
            return any(walk(v) for v in node)
        return False
    return walk(schema.to_json())


def features_of(protocol: Protocol) -> tuple[set[str], set[str]]:
    """The (reader, writer) features a protocol supports: its lists, or what its legacy versions imply."""
    reader = set(protocol.readerFeatures or ())
    writer = set(protocol.writerFeatures or ())
    if protocol.minWriterVersion < 7:
        for version, features in _LEGACY_WRITER.items():
            if protocol.minWriterVersion >= version:
                writer.update(features)
    if protocol.minReaderVersion == 2:
        reader.add(COLUMN_MAPPING)
    return reader, writer


def table_features(protocol: Protocol) -> list[str]:
    """Every feature the protocol supports, by name, sorted (DESCRIBE DETAIL's tableFeatures)."""
    reader, writer = features_of(protocol)
    return sorted(reader | writer)


def required_protocol(current: Protocol, configuration: Mapping[str, str], schema: Schema | None = None,
                      writer_features: Sequence[str] = ()) -> Protocol:
    """`current`, or the protocol that adds what `configuration` turns on (and `writer_features`,
    such as `clustering`): (3, 7) for a reader-writer feature, (1, 7) (the reader version kept)
    for writer-only ones alone."""
    reader, writer = features_of(current)
    both = [f for f in wanted_features(configuration) if not supports(current, f)]
    wanted = [*wanted_writer_features(configuration, schema), *writer_features]
    writer_only = [f for f in dict.fromkeys(wanted) if f not in writer]
    if not both and not writer_only:
        return current
    reader.update(both)
    writer.update(both + writer_only)
    if both or current.minReaderVersion >= 3:
        return Protocol(3, 7, tuple(sorted(reader)), tuple(sorted(writer)))
    return Protocol(current.minReaderVersion, 7, None, tuple(sorted(writer)))


def merged_protocol(a: Protocol, b: Protocol) -> Protocol:
    """The least protocol that supports everything `a` and `b` do (RESTORE never downgrades).
    Two legacy protocols merge by version; otherwise the result lists its features, the legacy
    side's implied ones included, as PROTOCOL.md asks of a table-features protocol."""
    if a == b:
        return a
    uses_lists = [p for p in (a, b) if p.minWriterVersion >= 7 or p.minReaderVersion >= 3]
    if not uses_lists:
        return Protocol(max(a.minReaderVersion, b.minReaderVersion), max(a.minWriterVersion, b.minWriterVersion))
    (ra, wa), (rb, wb) = features_of(a), features_of(b)
    writer = tuple(sorted(wa | wb))
    if any(p.minReaderVersion >= 3 for p in (a, b)):
        return Protocol(3, 7, tuple(sorted(ra | rb)), writer)
    return Protocol(max(a.minReaderVersion, b.minReaderVersion), 7, None, writer)
