"""Bucket joins: two tables bucketed alike, joined on their bucket columns with no shuffle.

Rows with equal bucket-column values hash to the same bucket on both sides, so bucket i of one
table only meets bucket i of the other. skiplake checks that the pair qualifies, prunes both
sides' files, and declares each side's bucket spec to Spark (planned_reads.bucketed_relation; under
Spark Connect, a bucketed catalog table: skiplake.spark.buckets.bucketed_reads). Spark's
planner then sees both inputs hash-partitioned by the join keys and plans a sort-merge join
with no Exchange: each task reads one bucket's files from both sides. When one count is a
multiple of the other, Spark's CoalesceBucketsInJoin folds the larger side's buckets (bucket b
of n is bucket b mod m of m, since m divides n).

Anything that does not qualify runs as Spark's ordinary join; the report says why.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import reduce
from typing import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from skiplake.errors import InvalidArgumentError
from skiplake.layout.bucket_spec import BucketSpec, bucket_id_of_tags, bucket_spec_of, files_without_bucket_ids
from skiplake.log.location import basename
from skiplake.log.snapshot import Snapshot
from skiplake.skipping.plan import ScanPlan, plan_scan
from skiplake.skipping.report import ScanReport
from skiplake.spark.buckets.bucketed_reads import BucketedRead, bucketed_read
from skiplake.spark.reads.planned_reads import hive_layout, read_planned
from skiplake.spark.session.gateway import is_connect

# The join types a bucket join runs; Spark's spelling of each accepted alias.
JOIN_TYPES = {"inner": "inner", "left": "left_outer", "leftouter": "left_outer", "left_outer": "left_outer",
              "semi": "left_semi", "leftsemi": "left_semi", "left_semi": "left_semi"}
_OTHER_JOIN_TYPES = {"right", "rightouter", "right_outer", "full", "outer", "fullouter", "full_outer",
                     "anti", "leftanti", "left_anti", "cross"}
COALESCE_CONF = "spark.sql.bucketing.coalesceBucketsInJoin.enabled"
RATIO_CONF = "spark.sql.bucketing.coalesceBucketsInJoin.maxBucketRatio"
ALL_KEYS_CONF = "spark.sql.requireAllClusterKeysForCoPartition"
ORDERING_CONF = "spark.sql.legacy.bucketedTableScan.outputOrdering"


@dataclass(frozen=True)
class JoinReport:
    """Whether a join of two lake tables runs as a bucket join, and if not, why."""
    left: str
    right: str
    how: str
    keys: list[tuple[str, str]]
    bucketed: bool
    reason: str                     # the bucket layout used, or why Spark's own join runs
    left_scan: ScanReport | None = None
    right_scan: ScanReport | None = None
    buckets: int = 0                # buckets per side as joined (after coalescing), 0 when not bucketed

    def to_dict(self) -> dict:
        """The report's fields as a dict (the scan reports as nested dicts)."""
        return asdict(self)

    def to_json(self) -> str:
        """The report as JSON text."""
        return json.dumps(self.to_dict())

    def text(self) -> str:
        """The join as SQL, then which join runs (bucket join or Spark's own) and why."""
        on = " AND ".join(f"{_short(self.left)}.{a} = {_short(self.right)}.{b}" for a, b in self.keys)
        head = f"Join {self.left} {self.how.upper().replace('_', ' ')} JOIN {self.right} ON {on}"
        kind = "BucketJoin (no Exchange)" if self.bucketed else "Spark's own join (shuffle)"
        return f"{head}\n  {kind}: {self.reason}"

    def __str__(self) -> str:
        """The report's text()."""
        return self.text()


def _short(label: str) -> str:
    """How a condition names a side: its alias ("store_sales AS ss" -> "ss") or its name."""
    return label.rsplit(" AS ", 1)[-1]


@dataclass
class JoinSide:
    """One input of a join: its table's snapshot, the files planned for it and how the query names it."""
    snapshot: Snapshot
    plan: ScanPlan
    label: str
    columns: dict[str, str] = field(default_factory=dict)  # lower-case name -> schema spelling

    def __post_init__(self) -> None:
        """Index the table's column names by their lower case."""
        self.columns = {n.lower(): n for n in self.snapshot.schema.names}

    @property
    def spec(self) -> BucketSpec | None:
        """The table's bucket spec, or None when it is not bucketed."""
        return bucket_spec_of(self.snapshot.configuration)


def normal_join_type(how: str) -> str:
    """Spark's spelling of the join type `how` (any case, spaces for underscores); an unknown type is
    an InvalidArgumentError."""
    key = how.lower().replace(" ", "_")
    if key in JOIN_TYPES:
        return JOIN_TYPES[key]
    if key.replace("_", "") in _OTHER_JOIN_TYPES or key in _OTHER_JOIN_TYPES:
        return key
    raise InvalidArgumentError(
        f"unknown join type {how!r}: use inner, left, left_semi (bucket joins) or right, full, left_anti, cross")


def check(left: JoinSide, right: JoinSide, keys: Sequence[tuple[str, str]], how: str,
          spark: SparkSession) -> tuple[bool, str, int]:
    """(qualifies, the layout or the reason it does not, buckets per side as joined)."""
    if how not in JOIN_TYPES.values():
        return False, f"a {how.replace('_', ' ')} join; bucket joins run inner, left outer and left semi joins", 0
    for side in (left, right):
        if side.spec is None:
            return False, f"{side.label} is not bucketed", 0
    ls, rs = left.spec, right.spec
    assert ls is not None and rs is not None
    problem = _key_problem(left, right, ls, rs, keys, spark) or _type_problem(left, right, ls, rs)
    if problem:
        return False, problem, 0
    big, small = max(ls.num_buckets, rs.num_buckets), min(ls.num_buckets, rs.num_buckets)
    if big % small:
        return False, (f"{ls.num_buckets} and {rs.num_buckets} buckets: neither count is a multiple of the other"), 0
    problem = _file_problem(left, ls) or _file_problem(right, rs)
    if problem:
        return False, problem, 0
    if big == small:
        return True, f"{small} buckets on both sides", small
    return True, f"{big} buckets coalesced to {small} to meet the other side", small


def _key_problem(left: JoinSide, right: JoinSide, ls: BucketSpec, rs: BucketSpec,
                 keys: Sequence[tuple[str, str]], spark: SparkSession) -> str | None:
    """Why the join keys do not pair the two sides' bucket columns, or None."""
    if len(ls.columns) != len(rs.columns):
        return (f"{left.label} is bucketed by {list(ls.columns)} and {right.label} by {list(rs.columns)}: "
                "different numbers of bucket columns")
    wanted = [(a.lower(), b.lower()) for a, b in zip(ls.columns, rs.columns)]
    given = {(a.lower(), b.lower()) for a, b in keys}
    missing = [f"{a} = {b}" for a, b in zip(ls.columns, rs.columns) if (a.lower(), b.lower()) not in given]
    if missing:
        return (f"the join keys do not pair the bucket columns: it needs {' AND '.join(missing)} "
                f"({left.label} is bucketed by {list(ls.columns)}, {right.label} by {list(rs.columns)})")
    if len(given) > len(wanted) and (spark.conf.get(ALL_KEYS_CONF, "true") or "true").lower() != "false":
        return (f"the join has keys beyond the bucket columns, and Spark shuffles such joins unless "
                f"{ALL_KEYS_CONF}=false")
    return None


def _type_problem(left: JoinSide, right: JoinSide, ls: BucketSpec, rs: BucketSpec) -> str | None:
    """Why equal key values might not meet in equal buckets, or None."""
    for a, b in zip(ls.columns, rs.columns):
        ta, tb = left.snapshot.schema.field(a).type, right.snapshot.schema.field(b).type
        if ta != tb:
            return (f"bucket columns {a} ({ta}) and {b} ({tb}) have different types, "
                    "so equal values may hash to different buckets")
        if ta in ("float", "double"):
            # Spark joins floating-point keys on normalize(k) (NaN and -0.0 made canonical), a
            # different expression from the scans' partitioning on k, so it shuffles anyway.
            return (f"bucket column {a} is {ta}: Spark joins floating-point keys on their normalized "
                    "values and shuffles both sides")
    return None


def _file_problem(side: JoinSide, spec: BucketSpec) -> str | None:
    """Why Spark's bucketed scan cannot read a side's files as buckets of `spec`, or None."""
    with_dv = [f for f in side.plan.files if f.deletionVector]
    if with_dv:
        return (f"{len(with_dv)} selected files of {side.label} have deletion vectors, whose rows a bucketed scan "
                f"cannot leave out (e.g. {with_dv[0].path}); OPTIMIZE the table to rewrite them")
    unbucketed = files_without_bucket_ids(side.plan.files, spec)
    if unbucketed:
        return (f"{len(unbucketed)} selected files of {side.label} carry no bucket id (written by another "
                f"writer, e.g. {unbucketed[0]}); OPTIMIZE the table to re-bucket them")
    snap = side.snapshot
    if not hive_layout(snap.table_path, snap.partition_columns, side.plan.files):
        return f"files of {side.label} are not in Hive-style partition folders"
    return None


def connect_reads(spark: SparkSession, left: JoinSide, right: JoinSide
                  ) -> tuple[BucketedRead, BucketedRead] | str:
    """Under Spark Connect, the two sides' bucketed reads (see skiplake.spark.buckets.bucketed_reads),
    or why one cannot be made."""
    reads = []
    for side in (left, right):
        assert side.spec is not None
        found = bucketed_read(spark, side.snapshot, side.plan.files, side.spec)
        if isinstance(found, str):
            return found
        reads.append(found)
    return reads[0], reads[1]


def prepare_session(spark: SparkSession, left: JoinSide, right: JoinSide) -> None:
    """Session settings a bucket join of these two sides needs; Spark reads them when the join
    is planned, which is when the DataFrame first runs.

    - Counts that differ: Spark folds the larger side's buckets (CoalesceBucketsInJoin), off by
      default and limited to a ratio of 4.
    - Buckets of one file sorted by the join keys: Spark may then take each bucket as sorted and
      drop the sort-merge join's Sort (`legacy.bucketedTableScan.outputOrdering`). skiplake's
      writer sorts every file by the spec's sort_by, and Spark claims the order only for
      buckets of a single file, so this holds for any table Spark reads as bucketed."""
    ls, rs = left.spec, right.spec
    assert ls is not None and rs is not None
    if ls.num_buckets != rs.num_buckets:
        ratio = max(ls.num_buckets, rs.num_buckets) // min(ls.num_buckets, rs.num_buckets)
        _set_at_least(spark, COALESCE_CONF, "true")
        if int(spark.conf.get(RATIO_CONF, "4") or 4) < ratio:
            spark.conf.set(RATIO_CONF, str(ratio))
    elif _presorted(left, ls) or _presorted(right, rs):
        _set_at_least(spark, ORDERING_CONF, "true")


def _set_at_least(spark: SparkSession, key: str, value: str) -> None:
    if (spark.conf.get(key, None) or "").lower() != value:
        spark.conf.set(key, value)


def _presorted(side: JoinSide, spec: BucketSpec) -> bool:
    """Whether every selected bucket is one file sorted by the bucket columns first."""
    lead = [c.lower() for c in spec.sort_by[:len(spec.columns)]]
    if lead != [c.lower() for c in spec.columns]:
        return False
    buckets = [bucket_id_of_tags(f.tags) for f in side.plan.files]
    return len(buckets) == len(set(buckets))


def join_keys(left: JoinSide, right: JoinSide, on: str | Sequence[str] | Sequence[tuple[str, str]]
              ) -> tuple[list[tuple[str, str]], bool]:
    """(pairs of key columns spelled as the schemas spell them, whether `on` names shared columns)."""
    items: list = [on] if isinstance(on, str) else list(on)
    if not items:
        raise InvalidArgumentError("a join needs at least one key: on='k' or on=[('left_k', 'right_k')]")
    pairs = []
    shared = all(isinstance(i, str) for i in items)
    for item in items:
        if isinstance(item, str):
            a, b = item, item
        elif isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(x, str) for x in item):
            a, b = item
        else:
            raise InvalidArgumentError(
                f"join key {item!r}: give a column name or a (left column, right column) pair of names")
        for side, name in ((left, a), (right, b)):
            if name.lower() not in side.columns:
                raise InvalidArgumentError(
                    f"join key {name!r} is not a column of {side.label} (columns: {', '.join(side.columns.values())})")
        pairs.append((left.columns[a.lower()], right.columns[b.lower()]))
    return pairs, shared


def bucket_join(spark: SparkSession, left: Snapshot, right: Snapshot,
                on: str | Sequence[str] | Sequence[tuple[str, str]], how: str = "inner",
                left_where: str | None = None, right_where: str | None = None,
                left_label: str | None = None, right_label: str | None = None) -> tuple[DataFrame, JoinReport]:
    """Join two lake tables' snapshots, as a bucket join when they qualify (see the module doc).

    `on` names shared key columns (kept once in the output, like DataFrame.join) or gives
    (left column, right column) pairs. Each side is pruned by its own where first."""
    kind = normal_join_type(how)
    lside = JoinSide(left, plan_scan(left, left_where), left_label or _name(left))
    rside = JoinSide(right, plan_scan(right, right_where), right_label or _name(right))
    pairs, shared = join_keys(lside, rside, on)
    ok, reason, buckets = check(lside, rside, pairs, kind, spark)
    reads = connect_reads(spark, lside, rside) if ok and is_connect(spark) else None
    if isinstance(reads, str):
        ok, reason, buckets = False, reads, 0
    if ok:
        prepare_session(spark, lside, rside)
    if isinstance(reads, tuple):
        ldf, rdf = (_where(r.frame(spark), w) for r, w in zip(reads, (left_where, right_where)))
    else:
        ldf = read_planned(spark, left, lside.plan.files, left_where, bucketed=ok)
        rdf = read_planned(spark, right, rside.plan.files, right_where, bucketed=ok)
    if ok:
        # A side under the broadcast threshold would otherwise be broadcast: an Exchange after all.
        rdf = rdf.hint("merge")
    if shared:
        df = ldf.join(rdf, on=[a for a, _ in pairs], how=kind)
    else:
        ldf, rdf = ldf.alias("__left"), rdf.alias("__right")  # aliases keep a self-join unambiguous
        cond = reduce(lambda x, y: x & y,
                      [F.col(f"__left.`{a}`") == F.col(f"__right.`{b}`") for a, b in pairs])
        df = ldf.join(rdf, on=cond, how=kind)
    report = JoinReport(lside.label, rside.label, kind, pairs, ok, reason, lside.plan.report, rside.plan.report,
                        buckets)
    return df, report


def _where(df: DataFrame, where: str | None) -> DataFrame:
    return df.filter(where) if where else df


def _name(snapshot: Snapshot) -> str:
    return basename(snapshot.table_path)
