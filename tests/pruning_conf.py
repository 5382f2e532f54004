"""Dynamic file pruning's settings for test tables of kilobytes.

The size triggers are lowered so that small tables qualify, and the cost model stays on but is
priced as if every byte took a millisecond to scan and the file filter cost nothing: pruning a
file of these tables pays, so the
tests exercise the model's path and still see pruning applied. (The model's own figures, on such
tables, decline every build: tests/test_dynamic_pruning.py checks that too.)
"""
from skiplake.spark.pruning import pruning_settings as dfp

SMALL_TABLES = {dfp.SIZE_THRESHOLD: "0", dfp.FILES_THRESHOLD: "2", dfp.SCAN_BYTES_PER_SECOND: "1KB",
                dfp.BUILD_JOB_SECONDS: "0", dfp.SPECULATIVE_BUILD_SHARE: "1", dfp.FILTERED_SCAN_SHARE: "0"}
COST_SETTINGS = (dfp.SCAN_BYTES_PER_SECOND, dfp.BUILD_JOB_SECONDS, dfp.SPECULATIVE_BUILD_SHARE,
                 dfp.FILTERED_SCAN_SHARE)
