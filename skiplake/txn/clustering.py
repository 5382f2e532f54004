"""Liquid clustering's table side: the clustering columns, kept in the `delta.clustering` metadata
domain, and which files an incremental OPTIMIZE rewrites.

A clustered table has the writer feature `clustering` (with `domainMetadata`) and no partition
columns. Its clustering columns are the domain's `clusteringColumns`, each a column path of
physical names (`[["a"], ["b"]]`, as delta-spark writes it; a list of plain names is read too).
No columns (`[]`) means clustering is off until new columns are set.

OPTIMIZE clusters the files it rewrites as one *cube*: their rows are ordered along a
space-filling curve over the clustering columns and cut into files. Every file of a cube carries
the cube's id and columns in its tags (ZCUBE_ID, ZCUBE_ZORDER_BY, as delta-spark) and
`clusteringProvider: "liquid"`. The next OPTIMIZE rewrites only (see `files_to_cluster`):
- files that are not clustered yet (appends, rows rewritten by DML);
- the files of cubes smaller than the minimum cube size, merged with the new ones, so that many
  small cubes become one;
never a cube that reached the minimum size, nor files clustered by other columns (the keys
changed since) or by another clustering implementation. OPTIMIZE FULL rewrites every file.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping, Sequence

from skiplake.errors import InvalidArgumentError
from skiplake.layout.bucket_spec import bucket_spec_of
from skiplake.layout.curves import ZCUBE_ID, ZCUBE_ZORDER_BY
from skiplake.log.actions import AddFile, DomainMetadata, Protocol
from skiplake.log.column_mapping import physical_name, requested_mode
from skiplake.log.features import DOMAIN_METADATA, features_of
from skiplake.log.schema import Schema, is_primitive
from skiplake.log.snapshot import Snapshot
from skiplake.log.stats import indexed_columns, stats_settings

CLUSTERING_DOMAIN = "delta.clustering"
CLUSTERING = "clustering"            # the writer feature
PROVIDER = "liquid"                  # clusteringProvider of the files this implementation clusters
CLUSTERING_FEATURES = (CLUSTERING, DOMAIN_METADATA)
MAX_COLUMNS = 4                      # as delta-spark: more columns would each get too few bits


def is_clustered(protocol: Protocol) -> bool:
    """Whether the protocol has the `clustering` writer feature: a clustered table, even one whose
    clustering is off."""
    return CLUSTERING in features_of(protocol)[1]


def clustering_columns(snapshot: Snapshot) -> list[str] | None:
    """The logical names of the table's clustering columns; None when the table is not clustered
    (no `clustering` feature), [] when its clustering is off."""
    if not is_clustered(snapshot.protocol):
        return None
    config = snapshot.domain(CLUSTERING_DOMAIN)
    if config is None:
        return []
    try:
        paths = json.loads(config)["clusteringColumns"]
    except (ValueError, KeyError, TypeError):
        raise InvalidArgumentError(f"{snapshot.table_path}: the {CLUSTERING_DOMAIN} domain is not "
                                   f"{{\"clusteringColumns\": [...]}} ({config[:80]!r})") from None
    by_physical = {physical_name(f, snapshot.column_mapping): f.name for f in snapshot.schema.fields}
    out = []
    for path in paths:
        parts = [path] if isinstance(path, str) else list(path)
        if len(parts) != 1 or parts[0] not in by_physical:
            raise InvalidArgumentError(f"{snapshot.table_path}: clustering column {'.'.join(map(str, parts))!r} "
                                       "is not a top-level column of the table")
        out.append(by_physical[parts[0]])
    return out


def clustering_domain(schema: Schema, columns: Sequence[str], mode: str) -> DomainMetadata:
    """The `delta.clustering` domain naming `columns` (logical names, checked) by physical name."""
    paths = [[physical_name(schema.field(c), mode)] for c in columns]
    return DomainMetadata(CLUSTERING_DOMAIN, json.dumps({"clusteringColumns": paths}, separators=(",", ":")))


def check_curve_columns(path: str, schema: Schema, configuration: dict[str, str], partition_columns: Sequence[str],
                        columns: Sequence[str], what: str) -> list[str]:
    """`columns` in the schema's spelling, each one a space-filling curve can order files by: a
    data column of a primitive type with min/max stats. Errors say what is wrong and what to do."""
    parts = {p.lower() for p in partition_columns}
    limit, named = stats_settings(configuration)
    with_stats = {p[0].lower() for p, _ in indexed_columns(schema, parts, limit, named) if len(p) == 1}
    out: list[str] = []
    for c in columns:
        f = schema.find(c)
        if f is None:
            raise InvalidArgumentError(f"{path}: {what}: unknown column {c!r}; the table's columns are "
                                       f"{', '.join(schema.names)}")
        if f.name.lower() in parts:
            raise InvalidArgumentError(f"{path}: {what}: {f.name!r} is a partition column; every file already "
                                       "holds one value of it. Cluster by data columns.")
        if not is_primitive(f.type) or f.type == "binary" or f.type == "boolean":
            raise InvalidArgumentError(f"{path}: {what}: column {f.name!r} of type {f.type} has no min/max stats "
                                       "to skip files by")
        if f.name.lower() not in with_stats:
            raise InvalidArgumentError(
                f"{path}: {what}: column {f.name!r} gets no stats (delta.dataSkippingNumIndexedCols or "
                "delta.dataSkippingStatsColumns leave it out), so clustering by it would let no file be skipped")
        if f.name in out:
            raise InvalidArgumentError(f"{path}: {what}: column {f.name!r} is named twice")
        out.append(f.name)
    if not out:
        raise InvalidArgumentError(f"{path}: {what}: name at least one column")
    return out


def check_cluster_by(path: str, schema: Schema, configuration: dict[str, str], partition_columns: Sequence[str],
                     columns: Sequence[str]) -> list[str]:
    """The clustering columns of a table, checked: no partitioning or bucketing, at most
    MAX_COLUMNS columns."""
    if bucket_spec_of(configuration) is not None:
        raise InvalidArgumentError(f"{path}: a table is either bucketed or clustered, not both")
    if partition_columns:
        raise InvalidArgumentError(f"{path}: a table is either partitioned or clustered, not both (it is "
                                   f"partitioned by {list(partition_columns)}). Cluster by the partition "
                                   "columns and others in a new, unpartitioned table instead.")
    out = check_curve_columns(path, schema, configuration, (), columns, "cluster_by")
    if len(out) > MAX_COLUMNS:
        raise InvalidArgumentError(f"{path}: cluster_by names {len(out)} columns; at most {MAX_COLUMNS} can be "
                                   "clustered by (each more column orders the others less)")
    return out


@dataclass(frozen=True)
class NewClustering:
    """What creating a clustered table adds to its first commit."""
    domains: list[DomainMetadata]
    features: tuple[str, ...]
    operation_parameters: dict[str, list[str]]


def new_table_clustering(path: str, schema: Schema, configuration: dict[str, str],
                         partition_columns: Sequence[str], cluster_by: Sequence[str] | str | None) -> NewClustering:
    """The domain, features and history parameters of a new table clustered by `cluster_by`
    (checked), or none of them when it is None."""
    if cluster_by is None:
        return NewClustering([], (), {})
    keys = check_cluster_by(path, schema, configuration, partition_columns,
                            [cluster_by] if isinstance(cluster_by, str) else list(cluster_by))
    domain = clustering_domain(schema, keys, requested_mode(configuration))
    return NewClustering([domain], CLUSTERING_FEATURES, {"clusterBy": keys})


@dataclass(frozen=True)
class CubePlan:
    """What an incremental OPTIMIZE of a clustered table rewrites, and what it leaves."""
    files: list[AddFile]        # to cluster together into one new cube
    unclustered: int            # of those, files in no cube yet
    cubes_merged: int           # cubes below the minimum size merged in
    cubes_kept: int             # cubes left as they are
    other_files: int            # files clustered by other columns or another implementation, left alone


def files_to_cluster(files: Sequence[AddFile], columns: Sequence[str], min_cube_size: int,
                     full: bool = False) -> CubePlan:
    """The files an OPTIMIZE of a table clustered by `columns` rewrites (see the module doc);
    `full` rewrites them all (OPTIMIZE FULL). Nothing is rewritten when the only candidates are
    the files of one cube: it is as clustered as it gets."""
    new, cubes, other = _by_cube(files, [c.lower() for c in columns])
    if full:
        return CubePlan(list(files), len(new), len(cubes), 0, 0) if files else CubePlan([], 0, 0, 0, 0)
    small = {cube: fs for cube, fs in cubes.items() if sum(f.size for f in fs) < min_cube_size}
    if not new and len(small) <= 1:
        return CubePlan([], 0, 0, len(cubes), len(other))
    chosen = new + [f for fs in small.values() for f in fs]
    return CubePlan(chosen, len(new), len(small), len(cubes) - len(small), len(other))


def _by_cube(files: Sequence[AddFile], wanted: list[str]
             ) -> tuple[list[AddFile], dict[str, list[AddFile]], list[AddFile]]:
    """(files in no cube, the files of each cube of these clustering columns, files clustered
    otherwise: by another provider or other columns)."""
    new: list[AddFile] = []
    cubes: dict[str, list[AddFile]] = {}
    other: list[AddFile] = []
    for f in files:
        tags = f.tags or {}
        if f.clusteringProvider is None or ZCUBE_ID not in tags:
            new.append(f)
        elif f.clusteringProvider != PROVIDER or _cube_columns(tags) != wanted:
            other.append(f)
        else:
            cubes.setdefault(str(tags[ZCUBE_ID]), []).append(f)
    return new, cubes, other


def _cube_columns(tags: Mapping[str, str | None]) -> list[str] | None:
    try:
        names = json.loads(tags.get(ZCUBE_ZORDER_BY) or "null")
    except ValueError:
        return None
    return [str(n).lower() for n in names] if isinstance(names, list) else None
