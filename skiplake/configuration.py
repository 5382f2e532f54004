"""Every table property and session setting skiplake reads, with its default and what it does.

The keys and defaults are the constants of the modules that read them, so this list cannot say
another default than the code uses; the configuration reference of the docs is generated from it,
and a unit test fails when a module reads a `delta.*` or `spark.skiplake.*` key this list lacks.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from skiplake.layout.bucket_spec import COLUMNS_KEY, NUM_BUCKETS_KEY, SORT_COLUMNS_KEY
from skiplake.log.checkpoint import (
    CHECKPOINT_INTERVAL,
    DEFAULT_INTERVAL,
    DEFAULT_TOMBSTONE_RETENTION_MS,
    TOMBSTONE_RETENTION,
    TXN_RETENTION,
)
from skiplake.log.cleanup import (
    CHECKPOINT_RETENTION,
    DEFAULT_CHECKPOINT_RETENTION_MS,
    DEFAULT_LOG_RETENTION_MS,
    ENABLE_CLEANUP,
    LOG_RETENTION,
)
from skiplake.log.column_mapping import MODE as MODE_KEY
from skiplake.log.features import (
    CHECKPOINT_POLICY,
    CONSTRAINT_PREFIX,
    ENABLE_CHANGE_DATA_FEED,
    ENABLE_DELETION_VECTORS,
    ENABLE_ROW_TRACKING,
)
from skiplake.log.stats import DEFAULT_NUM_INDEXED_COLS, NUM_INDEXED_COLS_KEY, STATS_COLUMNS_KEY
from skiplake.log.typed_stats import WRITE_STATS_AS_STRUCT
from skiplake.spark.convert.footer_jobs import DEFAULT_THRESHOLD, THRESHOLD_CONF
from skiplake.spark.optimize import auto_compaction as auto
from skiplake.spark.pruning import pruning_settings as dfp
from skiplake.spark.query import log_answers, views
from skiplake.spark.reads import log_job
from skiplake.spark.reads.catalog_tables import PARTITION_FILTERING
from skiplake.txn.commit import APPEND_ONLY
from skiplake.txn.file_compaction import AUTO_COMPACT
from skiplake.txn.isolation import DEFAULT_LEVEL, ISOLATION_PROPERTY
from skiplake.txn.row_tracking import SUSPENDED


@dataclass(frozen=True)
class Setting:
    """One key: its default as a user would write it ("" when unset means off), what it does, and
    the guide page that explains it."""
    key: str
    default: str
    meaning: str
    guide: str


def _days(ms: int) -> str:
    return f"interval {ms // 86_400_000} days"


TABLE_PROPERTIES: tuple[Setting, ...] = (
    Setting(ISOLATION_PROPERTY, DEFAULT_LEVEL,
            "`WriteSerializable` or `Serializable`: what a commit is checked against; written only when "
            "set, and an unset property is WriteSerializable", "concurrency.md#isolation-levels"),
    Setting(ENABLE_DELETION_VECTORS, "false",
            "`true`: DELETE, UPDATE and MERGE mark rows with deletion vectors instead of rewriting files, and "
            "concurrent DML conflicts only on the same rows (the protocol becomes 3/7)", "deletion-vectors.md"),
    Setting(MODE_KEY, "none",
            "`name` or `id`: columns have physical names in files, partition values and stats, so they can be "
            "renamed and dropped without a rewrite; never changed once set", "column-mapping.md"),
    Setting(ENABLE_CHANGE_DATA_FEED, "false",
            "`true`: every version records the rows it inserted, deleted and updated, read with `t.changes()`",
            "change-data-feed.md"),
    Setting(ENABLE_ROW_TRACKING, "false",
            "`true`: every row gets a row id and a row commit version (`t.read(with_row_ids=True)`)",
            "row-tracking.md"),
    Setting(SUSPENDED, "false", "`true`: writers stop assigning row ids", "row-tracking.md"),
    Setting(CONSTRAINT_PREFIX + "<name>", "",
            "a CHECK constraint's SQL expression, kept by every write (`add_constraint`, `drop_constraint`)",
            "constraints.md"),
    Setting(APPEND_ONLY, "false",
            "`true`: only appends and OPTIMIZE; anything that removes or changes rows is refused with "
            "AppendOnlyTableError", "reference.md#maintenance"),
    Setting(CHECKPOINT_INTERVAL, str(DEFAULT_INTERVAL), "a checkpoint is written every this many commits",
            "how-it-works.md"),
    Setting(CHECKPOINT_POLICY, "classic",
            "`v2`: UUID-named V2 checkpoints whose file actions are in sidecar files under `_delta_log/_sidecars/`",
            "how-it-works.md"),
    Setting(WRITE_STATS_AS_STRUCT, "true",
            "`true`: checkpoints also hold each file's stats and partition values typed, which planning reads "
            "instead of the JSON stats", "how-it-works.md"),
    Setting(LOG_RETENTION, _days(DEFAULT_LOG_RETENTION_MS),
            "after a checkpoint, log files before the newest checkpoint older than this are deleted",
            "how-it-works.md"),
    Setting(CHECKPOINT_RETENTION, _days(DEFAULT_CHECKPOINT_RETENTION_MS),
            "checkpoint files are kept at least this long", "how-it-works.md"),
    Setting(ENABLE_CLEANUP, "true", "`false` keeps every log file", "how-it-works.md"),
    Setting(TOMBSTONE_RETENTION, _days(DEFAULT_TOMBSTONE_RETENTION_MS),
            "removed files are kept this long; a shorter VACUUM retention is refused unless `force=True`",
            "reference.md#maintenance"),
    Setting(NUM_INDEXED_COLS_KEY, str(DEFAULT_NUM_INDEXED_COLS),
            "stats are kept for this many leaf columns, from the first (`-1`: all)", "skipping.md"),
    Setting(STATS_COLUMNS_KEY, "",
            "the columns that get stats, named (takes precedence over the number above)", "skipping.md"),
    Setting(TXN_RETENTION, "",
            "how long an application's idempotent-write version (txn action) is kept; checkpoints drop older "
            "ones (unset: for ever)", "streaming.md#foreachbatch-upserts-exactly-once"),
    Setting(AUTO_COMPACT, "false",
            "`true` or `auto`: after a write commits, the partitions it wrote to that hold enough small files "
            "are compacted in a commit of their own", "streaming.md#small-files"),
    Setting(NUM_BUCKETS_KEY, "", "a bucketed table's number of buckets (skiplake's own key; Delta readers ignore it)",
            "bucketing.md#where-the-spec-lives"),
    Setting(COLUMNS_KEY, "", "a bucketed table's bucket columns", "bucketing.md#where-the-spec-lives"),
    Setting(SORT_COLUMNS_KEY, "", "the columns each bucket file is sorted by", "bucketing.md#where-the-spec-lives"),
)

CATALOG_TABLE_PROPERTIES: tuple[Setting, ...] = (
    Setting(PARTITION_FILTERING, "true",
            "a catalog table's property: `false` fetches every partition instead of sending GetPartitions an "
            "expression", "catalog.md#from-spark"),
)

# Dynamic file pruning's settings, by the field of DynamicPruningSettings that holds each.
_PRUNING: tuple[tuple[str, str, str], ...] = (
    (dfp.ENABLED, "enabled", "the master switch of dynamic file pruning"),
    (dfp.SIZE_THRESHOLD, "size_threshold", "a probe table's selected bytes below which it is not pruned at run time"),
    (dfp.FILES_THRESHOLD, "files_threshold", "a probe table's selected files below which it is not pruned"),
    (dfp.MAX_VALUES, "max_values", "build keys sent as a list; past it, ranges"),
    (dfp.MAX_RANGES, "max_ranges", "ranges sent when the keys are too many for a list"),
    (dfp.JOIN_TYPES, "join_types", "the join types pruned (Spark's names, comma-separated)"),
    (dfp.BUILD_SIZE_THRESHOLD, "build_size_threshold", "Spark's estimate of a build side above which it is not used"),
    (dfp.MAX_FILE_OVERLAP, "max_file_overlap",
     "a probe whose files overlap more than this share on the key is not pruned by files"),
    (dfp.LOCAL_BUILD_THRESHOLD, "local_build_threshold",
     "a one-table build side up to this size is read in the driver, with no Spark job"),
    (dfp.UNCLUSTERED_ROW_FILTER, "unclustered_row_filter",
     "a probe not clustered by the key still gets a short key list as a row filter"),
    (dfp.COST_MODEL, "cost_model", "apply a build's keys only where the cost model says pruning pays"),
    (dfp.SCAN_BYTES_PER_SECOND, "scan_bytes_per_second", "the cost model's bytes one scan task reads per second"),
    (dfp.BUILD_JOB_SECONDS, "build_job_seconds", "the cost model's fixed cost of a Spark job for a build side"),
    (dfp.SPECULATIVE_BUILD_SHARE, "speculative_build_share",
     "a build not sure to pay may cost at most this share of the scan"),
    (dfp.FILTERED_SCAN_SHARE, "filtered_scan_share", "kept files read through the file filter cost this share more"),
    (dfp.MATERIALIZE_BUILDS, "materialize_builds", "a build a Spark job evaluated serves the query too (runs once)"),
)


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def _pruning_settings() -> tuple[Setting, ...]:
    defaults = dfp.DynamicPruningSettings()
    known = {f.name for f in fields(defaults)}
    out = []
    for key, name, meaning in _PRUNING:
        assert name in known, name   # a renamed field must be renamed here too
        out.append(Setting(key, _shown(getattr(defaults, name)), meaning, "dynamic-pruning.md"))
    return tuple(out)


SESSION_SETTINGS: tuple[Setting, ...] = _pruning_settings() + (
    Setting(THRESHOLD_CONF, str(DEFAULT_THRESHOLD),
            "a conversion reads footers with a Spark job instead of driver threads from this many files",
            "convert.md#stats"),
    Setting(auto.SESSION_ENABLED, "false",
            "true: writes through the Table API compact after committing, for tables without "
            "delta.autoOptimize.autoCompact", "streaming.md#small-files"),
    Setting(auto.SESSION_MIN_FILES, str(auto.DEFAULT_MIN_FILES),
            "auto compaction rewrites a partition holding at least this many small files", "streaming.md#small-files"),
    Setting(auto.SESSION_MAX_FILE_SIZE, str(auto.DEFAULT_MAX_FILE_SIZE),
            "auto compaction's small-file bound and target file size, in bytes", "streaming.md#small-files"),
    Setting(log_answers.ENABLED, "true",
            "lake.sql answers COUNT, MIN and MAX from the log's stats where they are exact (false: always scan)",
            "skipping.md#answers-from-the-log"),
    Setting(views.WHOLE_VIEW_MAX_FILES_CONF, str(views.WHOLE_VIEW_MAX_FILES),
            "lake.sql keeps a view over every file of a table up to this many files (reused by later queries); "
            "a larger table's references read views of their planned files only", "scale.md#lakesql-on-large-tables"),
    Setting(log_job.MIN_FILES_CONF, str(log_job.DEFAULT_MIN_FILES),
            "a table whose checkpoint holds at least this many files is opened without them (Table.open, "
            "Lake.table), and its scans and counts are planned by a Spark job over the checkpoint", "scale.md#past-one-driver"),
    Setting("spark.databricks.delta.retentionDurationCheck.enabled", "true",
            "false lets the VACUUM statement retain fewer hours than the table's minimum, as in delta-spark "
            "(safe only when no reader or writer runs)", "reference/sql.md"),
)
