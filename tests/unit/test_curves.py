"""Z-order placement without Spark: range ids, bit interleaving, file cut points."""
from __future__ import annotations

import datetime as dt
import itertools
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiplake.layout.curves import (
    Curve,
    bits_per_column,
    cut_points,
    hilbert,
    interleave,
    partition_keys,
    range_boundaries,
    range_ids,
)
from skiplake.layout.sortable import sortable
from tests.tiers import examples


def test_interleave_puts_bits_of_each_column_in_turn():
    # Two columns, 2 bits: a = 0b10, b = 0b01 -> a1 b1 a0 b0 = 1 0 0 1
    z = interleave([np.array([2], np.uint64), np.array([1], np.uint64)], 2)
    assert z.tolist() == [0b1001]
    # The curve visits a 4x4 grid in Z order: (0,0) (0,1) (1,0) (1,1) (0,2) ...
    a, b = np.meshgrid(np.arange(4, dtype=np.uint64), np.arange(4, dtype=np.uint64), indexing="ij")
    z = interleave([a.ravel(), b.ravel()], 2)
    assert sorted(z.tolist()) == list(range(16))
    assert z[(a.ravel() == 1) & (b.ravel() == 1)].tolist() == [3]


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.integers(-1000, 1000) | st.none(), min_size=1, max_size=300), st.integers(2, 64))
def test_range_ids_are_monotone_and_nulls_first(values, ranges):
    arr = pa.array(values, pa.int64())
    bounds = range_boundaries(arr, ranges)
    ids = range_ids(arr, bounds)
    assert len(bounds) <= ranges - 1
    pairs = sorted((v, i) for v, i in zip(values, ids.tolist()) if v is not None)
    assert all(a[1] <= b[1] for a, b in zip(pairs, pairs[1:]))  # order-preserving
    assert all(i == 0 for v, i in zip(values, ids.tolist()) if v is None)
    assert all(i >= 1 for v, i in zip(values, ids.tolist()) if v is not None)


def test_equal_frequency_ranges_on_skewed_data():
    # 90% of the rows hold one value: ranks, not raw values, decide the ranges.
    values = pa.array([7] * 900 + list(range(1000, 1100)), pa.int64())
    ids = range_ids(values, range_boundaries(values, 16))
    assert len(set(ids[900:].tolist())) >= 2  # the tail still spans several ranges


def test_curve_over_strings_dates_decimals():
    t = pa.table({"s": pa.array(["b", None, "a", "c" * 40]), "d": pa.array([dt.date(2001, 1, 2), None,
                                                                           dt.date(2000, 5, 5), dt.date(2003, 1, 1)]),
                  "m": pa.array([Decimal("1.50"), Decimal("-2.00"), None, Decimal("9.99")], pa.decimal128(5, 2))})
    curve = Curve.from_sample(t, ["s", "d", "m"])
    assert curve.bits == bits_per_column(3)
    z = curve.zvalues(t)
    assert z.dtype == np.int64 and (z >= 0).all()
    assert sortable(t.column("m").combine_chunks()).tolist()[:2] == [Decimal("1.50"), Decimal("-2.00")]


def test_cut_points_split_evenly_and_keys_name_partitions():
    z = np.arange(1000, dtype=np.int64)
    cuts = cut_points(z, 4)
    assert cuts.tolist() == [250, 500, 750]
    assert np.bincount(np.searchsorted(cuts, z, side="right")).tolist() == [250] * 4
    assert cut_points(z, 1).tolist() == []
    batch = pa.table({"p": pa.array([1, None, 1]), "q": pa.array(["x", "y", None])})
    keys = partition_keys(batch, ["p", "q"]).to_pylist()
    assert keys[0] != keys[1] != keys[2] and len(set(keys)) == 3


@pytest.mark.parametrize("dims, bits", [(1, 5), (2, 4), (3, 3), (4, 2)])
def test_hilbert_visits_every_cell_once_moving_to_a_neighbour_each_step(dims, bits):
    cells = np.array(list(itertools.product(range(1 << bits), repeat=dims)), dtype=np.uint64)
    h = hilbert([cells[:, i] for i in range(dims)], bits)
    assert sorted(h.tolist()) == list(range(len(cells)))
    path = cells[np.argsort(h)].astype(np.int64)
    assert (np.abs(np.diff(path, axis=0)).sum(axis=1) == 1).all()
    assert (path[0] == 0).all()   # it starts at the origin


def test_hilbert_curve_files_cover_tighter_boxes_than_zorder():
    rng = np.random.default_rng(7)
    sample = pa.table({"a": rng.integers(0, 10_000, 20_000), "b": rng.integers(0, 10_000, 20_000)})

    def mean_box(kind: str) -> float:
        curve = Curve.from_sample(sample, ["a", "b"], kind)
        z = curve.zvalues(sample)
        order = np.argsort(z, kind="stable")
        areas = []
        for run in np.array_split(order, 37):   # 37 files: runs that do not fall on powers of two
            a, b = sample["a"].to_numpy()[run], sample["b"].to_numpy()[run]
            areas.append((a.max() - a.min()) * (b.max() - b.min()))
        return float(np.mean(areas))
    assert mean_box("hilbert") < mean_box("zorder")
