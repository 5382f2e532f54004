"""Which tier a test run belongs to, and how many examples a property test draws in it.

`make test` (the gate) runs the tests not marked `slow`; `make test-full` sets
SKIPLAKE_TEST_TIER=full and runs every test, the whole Spark Connect rerun and each property test
with its full example count (docs/testing.md, "Two tiers").
"""
from __future__ import annotations

import os
from typing import Callable, Iterable

import pytest

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


def gate_sample(cases: Iterable[tuple], in_gate: Callable[[tuple], bool]) -> list:
    """A parametrize list whose cases `in_gate` refuses are marked slow: the full tier runs every
    case of a matrix, the gate a sample that still takes each value of each dimension."""
    return [case if in_gate(case) else pytest.param(*case, marks=pytest.mark.slow) for case in cases]
