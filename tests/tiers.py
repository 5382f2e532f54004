"""Which tier a test run belongs to, and how many examples a property test draws in it.

`make test` (the gate) runs the tests not marked `slow`; `make test-full` sets
SKIPLAKE_TEST_TIER=full and runs every test, the whole Spark Connect rerun and each property test
with its full example count (docs/testing.md, "Two tiers").
"""
from __future__ import annotations

import os

FULL = os.environ.get("SKIPLAKE_TEST_TIER") == "full"
GATE_SHARE = 4      # the gate draws a quarter of a property test's examples
GATE_MINIMUM = 10


def examples(full: int) -> int:
    """A property test's example count: `full` in the full run, a quarter of it (at least 10,
    at most `full`) in the gate. On a machine that ran the tests before, hypothesis's database
    (.hypothesis/, not committed) replays the examples that failed there first, in either tier."""
    if FULL:
        return full
    return min(full, max(GATE_MINIMUM, full // GATE_SHARE))
