"""Dynamic file pruning's settings, read from the Spark session conf at each query.

Named after the seed's (Databricks' `spark.databricks.optimizer.*`) under skiplake's prefix; see
docs/dynamic-pruning.md for why each default is what it is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from skiplake.errors import InvalidArgumentError
from skiplake.skipping.dfp_cost import CostModel
from skiplake.spark.session.gateway import is_connect
from skiplake.spark.session.setting_values import conf_count, conf_number

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PREFIX = "spark.skiplake.optimizer."
ENABLED = PREFIX + "dynamicFilePruning"
SIZE_THRESHOLD = PREFIX + "deltaTableSizeThreshold"
FILES_THRESHOLD = PREFIX + "deltaTableFilesThreshold"
MAX_VALUES = PREFIX + "dynamicFilePruning.maxValues"
MAX_RANGES = PREFIX + "dynamicFilePruning.maxRanges"
JOIN_TYPES = PREFIX + "dynamicFilePruning.joinTypes"
BUILD_SIZE_THRESHOLD = PREFIX + "dynamicFilePruning.buildSizeThreshold"
MAX_FILE_OVERLAP = PREFIX + "dynamicFilePruning.maxFileOverlap"
LOCAL_BUILD_THRESHOLD = PREFIX + "dynamicFilePruning.localBuildThreshold"
UNCLUSTERED_ROW_FILTER = PREFIX + "dynamicFilePruning.unclusteredRowFilter"
COST_MODEL = PREFIX + "dynamicFilePruning.costModel"
SCAN_BYTES_PER_SECOND = PREFIX + "dynamicFilePruning.scanBytesPerSecond"
BUILD_JOB_SECONDS = PREFIX + "dynamicFilePruning.buildJobSeconds"
SPECULATIVE_BUILD_SHARE = PREFIX + "dynamicFilePruning.speculativeBuildShare"
FILTERED_SCAN_SHARE = PREFIX + "dynamicFilePruning.filteredScanShare"
MATERIALIZE_BUILDS = PREFIX + "dynamicFilePruning.materializeBuilds"

# Spark's names of the join types the rule may apply to (the seed: inner and left semi; outer
# joins on their side that is not preserved).
ALL_JOIN_TYPES = ("Inner", "LeftSemi", "LeftOuter", "RightOuter")


@dataclass(frozen=True)
class DynamicPruningSettings:
    """Dynamic file pruning's settings, each under its PREFIX conf key; the defaults apply where one is unset."""
    enabled: bool = True
    size_threshold: int = 32 * 1024 * 1024     # probe table's selected bytes
    files_threshold: int = 8                    # probe table's selected files
    max_values: int = 10_000                    # build keys sent as an IN list; past it, ranges
    max_ranges: int = 64                        # ranges sent when the keys are too many
    join_types: tuple[str, ...] = ALL_JOIN_TYPES
    build_size_threshold: int = 10 * 1024 * 1024  # Spark's estimate of the build side (its broadcast default)
    max_file_overlap: float = 0.5               # skip probes whose files are not clustered by the key
    local_build_threshold: int = 64 * 1024 * 1024  # a one-table build side read in the driver up to this
    unclustered_row_filter: bool = True         # a probe not clustered by the key still gets a short key list as a row filter
    cost_model: bool = True                     # evaluate a build and apply its keys only where pruning pays (dfp_cost)
    scan_bytes_per_second: int = CostModel.scan_bytes_per_second  # file bytes one task gets through per second, scan and the work above it
    build_job_seconds: float = CostModel.build_job_seconds        # a Spark job's fixed cost, for a build side
    speculative_build_share: float = CostModel.speculative_share  # a build not sure to pay costs at most this share of the scan
    filtered_scan_share: float = CostModel.filtered_scan_share    # kept files read through the file filter cost this share more
    materialize_builds: bool = True             # a build evaluated by a Spark job serves the query too (runs once)

    def model(self, parallelism: int) -> CostModel:
        """The cost model with these settings, for scans `parallelism` tasks wide."""
        return CostModel(parallelism=max(1, parallelism), scan_bytes_per_second=max(1, self.scan_bytes_per_second),
                         build_job_seconds=self.build_job_seconds, speculative_share=self.speculative_build_share,
                         filtered_scan_share=self.filtered_scan_share, reused_builds=self.materialize_builds)

    @staticmethod
    def of(spark: "SparkSession") -> "DynamicPruningSettings":
        """The settings the session's conf gives now (the defaults, disabled, when dynamicFilePruning is off).

        A size, share, cost or join type that does not parse is an InvalidArgumentError."""
        conf = _prefixed_conf(spark)
        enabled = _bool(conf.get(ENABLED, "true"))
        if not enabled:
            return DynamicPruningSettings(enabled=False)
        d = DynamicPruningSettings()
        types = conf.get(JOIN_TYPES)
        return DynamicPruningSettings(
            enabled=True,
            size_threshold=conf_bytes(conf.get(SIZE_THRESHOLD), d.size_threshold),
            files_threshold=conf_count(FILES_THRESHOLD, conf.get(FILES_THRESHOLD), d.files_threshold),
            max_values=conf_count(MAX_VALUES, conf.get(MAX_VALUES), d.max_values),
            max_ranges=max(1, conf_count(MAX_RANGES, conf.get(MAX_RANGES), d.max_ranges)),
            join_types=_join_types(types) if types else d.join_types,
            build_size_threshold=conf_bytes(conf.get(BUILD_SIZE_THRESHOLD), d.build_size_threshold),
            max_file_overlap=conf_number(MAX_FILE_OVERLAP, conf.get(MAX_FILE_OVERLAP), d.max_file_overlap),
            local_build_threshold=conf_bytes(conf.get(LOCAL_BUILD_THRESHOLD), d.local_build_threshold),
            unclustered_row_filter=_bool(conf.get(UNCLUSTERED_ROW_FILTER, "true")),
            cost_model=_bool(conf.get(COST_MODEL, "true")),
            scan_bytes_per_second=conf_bytes(conf.get(SCAN_BYTES_PER_SECOND), d.scan_bytes_per_second),
            build_job_seconds=conf_number(BUILD_JOB_SECONDS, conf.get(BUILD_JOB_SECONDS), d.build_job_seconds),
            speculative_build_share=conf_number(SPECULATIVE_BUILD_SHARE, conf.get(SPECULATIVE_BUILD_SHARE),
                                                d.speculative_build_share),
            filtered_scan_share=conf_number(FILTERED_SCAN_SHARE, conf.get(FILTERED_SCAN_SHARE), d.filtered_scan_share),
            materialize_builds=_bool(conf.get(MATERIALIZE_BUILDS, "true")),
        )


_SEPARATOR = "\u0001"


def _prefixed_conf(spark: "SparkSession") -> dict[str, str]:
    """The session conf's settings under PREFIX, read in two JVM round trips rather than one per
    setting (each `spark.conf.get` is one, and every lake.sql query reads them)."""
    if is_connect(spark):  # every setting of the server's session in one request
        return {k: v for k, v in spark.conf.getAll.items() if k.startswith(PREFIX)}
    # A Scala Map prints each entry as `key -> value`; no key of ours holds an arrow.
    text = str(spark.conf._jconf.getAll().mkString(_SEPARATOR))
    out: dict[str, str] = {}
    for entry in text.split(_SEPARATOR):
        key, _, value = entry.partition(" -> ")
        if key.startswith(PREFIX):
            out[key] = value
    return out


def _bool(text: str | None) -> bool:
    return (text or "true").strip().lower() not in ("false", "0", "off", "no")


_UNITS = {"b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30,
          "t": 1 << 40, "tb": 1 << 40}


def conf_bytes(text: str | None, default: int) -> int:
    """`10GB`, `64m`, `1048576`: a size as Spark writes sizes in its conf."""
    if not text:
        return default
    t = text.strip().lower()
    digits = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = t[len(digits):].strip() or "b"
    if unit not in _UNITS or not digits.strip():
        raise InvalidArgumentError(f"{text!r} is not a size; write it like 32MB, 10GB or a number of bytes")
    return int(float(digits) * _UNITS[unit])


_ALIASES = {"inner": "Inner", "leftsemi": "LeftSemi", "semi": "LeftSemi", "leftouter": "LeftOuter",
            "left": "LeftOuter", "rightouter": "RightOuter", "right": "RightOuter"}


def _join_types(text: str) -> tuple[str, ...]:
    out = []
    for part in text.split(","):
        key = part.strip().lower().replace("_", "").replace(" ", "")
        if not key:
            continue
        if key not in _ALIASES:
            raise InvalidArgumentError(
                f"{JOIN_TYPES}: {part.strip()!r} is not a join type dynamic file pruning applies to; "
                "use inner, leftsemi, leftouter, rightouter")
        out.append(_ALIASES[key])
    return tuple(dict.fromkeys(out))
