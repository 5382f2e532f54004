"""skiplake.configuration lists every table property and session setting the code reads, with the
defaults the code uses: the docs' configuration reference is generated from it."""
from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import skiplake
from skiplake import configuration
from skiplake.log.checkpoint import checkpoint_interval
from skiplake.log.stats import stats_settings
from skiplake.txn.isolation import isolation_level

PACKAGE = Path(skiplake.__file__).parent
KEY = re.compile(r"^(delta\.[A-Za-z.]+|spark\.skiplake\.[A-Za-z.]+|spark\.databricks\.delta\.[A-Za-z.]+|skiplake\.bucketing\.[A-Za-z]+)$")
# Keys the code names that are no user's setting: column metadata, log domains, file tags, and
# properties a writer keeps for itself.
NOT_SETTINGS = {
    "delta.columnMapping.id", "delta.columnMapping.physicalName", "delta.columnMapping.maxColumnId",
    "delta.generationExpression", "delta.identity.start", "delta.identity.step", "delta.identity.highWaterMark",
    "delta.identity.allowExplicitInsert", "delta.typeChanges", "delta.invariants",
    "delta.rowTracking", "delta.clustering", "delta.rowTracking.preserved",
    "delta.rowTracking.materializedRowIdColumnName", "delta.rowTracking.materializedRowCommitVersionColumnName",
    "spark.skiplake.optimizer.",   # the prefix of the dynamic pruning settings
    # SHOW TBLPROPERTIES's rows for the protocol, as delta-spark shows them
    "delta.minReaderVersion", "delta.minWriterVersion", "delta.feature.",
}


def _keys_in_code() -> set[str]:
    """The keys the code spells out: string literals, and module constants built from a prefix."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and KEY.match(node.value):
                found.add(node.value)
    for info in pkgutil.walk_packages([str(PACKAGE)], "skiplake."):
        module = importlib.import_module(info.name)
        found |= {v for v in vars(module).values() if isinstance(v, str) and KEY.match(v)}
    return found


def _listed() -> set[str]:
    every = configuration.TABLE_PROPERTIES + configuration.CATALOG_TABLE_PROPERTIES + configuration.SESSION_SETTINGS
    return {s.key.removesuffix("<name>") for s in every}


def test_every_key_the_code_reads_is_listed():
    missing = {k for k in _keys_in_code() - NOT_SETTINGS if not any(k.startswith(p) for p in _listed())}
    assert not missing, f"read by the code but not in skiplake.configuration: {sorted(missing)}"


def test_every_listed_key_is_one_the_code_reads():
    keys = _keys_in_code()
    stale = {k for k in _listed() if k.endswith(".") and not any(c.startswith(k) for c in keys)}
    stale |= {k for k in _listed() if not k.endswith(".") and k not in keys and k != "partition_filtering.enabled"}
    assert not stale, sorted(stale)


def test_the_listed_defaults_are_the_codes():
    class Snap:
        configuration: dict[str, str] = {}
    assert str(checkpoint_interval(Snap())) == _default("delta.checkpointInterval")   # type: ignore[arg-type]
    assert isolation_level({}) == _default("delta.isolationLevel")
    assert str(stats_settings({})[0]) == _default("delta.dataSkippingNumIndexedCols")


def _default(key: str) -> str:
    return next(s.default for s in configuration.TABLE_PROPERTIES if s.key == key)


def test_every_setting_says_what_it_does_and_where_it_is_explained():
    every = configuration.TABLE_PROPERTIES + configuration.CATALOG_TABLE_PROPERTIES + configuration.SESSION_SETTINGS
    docs = PACKAGE.parent / "docs"
    for s in every:
        assert len(s.meaning) > 10, s.key
        assert (docs / s.guide.split("#")[0]).exists(), (s.key, s.guide)
