"""OPTIMIZE of a clustered table: the files not yet clustered, and the small cubes, rewritten as
one new cube along the Hilbert curve over the clustering columns (skiplake.txn.clustering says
which files; skiplake.spark.optimize.curve_rewrite rewrites them)."""
from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Callable

from skiplake.layout.curves import ZCUBE_ID, ZCUBE_ZORDER_BY, ZCUBE_ZORDER_CURVE
from skiplake.spark.optimize.curve_rewrite import rewrite_along_curve
from skiplake.spark.optimize.optimize_result import Compaction
from skiplake.txn.clustering import CLUSTERING_DOMAIN, PROVIDER, files_to_cluster

if TYPE_CHECKING:
    from skiplake.spark.writes.transaction import Transaction

CURVE = "hilbert"


def cluster(txn: "Transaction", columns: list[str], target_file_size: int, min_cube_size: int, full: bool,
            progress: Callable[[str], None] | None = None) -> Compaction:
    """Stage the incremental clustering of a table clustered by `columns` (all of it when `full`)."""
    say = progress or (lambda _line: None)
    plan = txn.scan(None)
    # The keys it clusters by: a concurrent change of them makes this OPTIMIZE a conflict.
    txn.read_set.domains.add(CLUSTERING_DOMAIN)
    cubes = files_to_cluster(plan.files, columns, min_cube_size, full)
    say(f"CLUSTER BY {', '.join(columns)}: {cubes.unclustered:,} files not clustered yet, {cubes.cubes_merged:,} "
        f"small cubes to merge, {cubes.cubes_kept:,} cubes kept" +
        (f", {cubes.other_files:,} files clustered by other columns left alone" if cubes.other_files else ""))
    if not cubes.files:
        return Compaction(None)
    tags = {ZCUBE_ID: str(uuid.uuid4()), ZCUBE_ZORDER_BY: json.dumps(columns, separators=(",", ":")),
            ZCUBE_ZORDER_CURVE: CURVE}
    adds = rewrite_along_curve(txn, cubes.files, columns, CURVE, target_file_size, tags, say, provider=PROVIDER)
    txn.stage("OPTIMIZE", {"predicate": [], "zOrderBy": [], "clusterBy": columns, "auto": False, "isFull": full,
                           "targetFileSize": target_file_size})
    return Compaction(txn, cubes.files, adds)
