"""Dynamic file pruning's cost model: the decision table, without Spark."""
from __future__ import annotations

from dataclasses import replace

import pytest

from skiplake.skipping.dfp_cost import CostModel, combined_share

MODEL = CostModel(parallelism=2, scan_bytes_per_second=100_000_000, file_open_bytes=1_000_000, build_job_seconds=0.2,
                  local_build_seconds=0.005, local_bytes_per_second=100_000_000, apply_seconds=0.03,
                  speculative_share=0.1, filtered_scan_share=0.0)


def test_scan_and_build_seconds_follow_files_bytes_and_cores():
    # 10 files and 200 MB over 2 tasks: (200 MB + 10 * 1 MB) / (100 MB/s * 2).
    assert MODEL.scan_seconds(10, 200_000_000) == pytest.approx(1.05)
    assert MODEL.build_seconds(1_000_000, local=True) == pytest.approx(0.015)
    assert MODEL.build_seconds(1_000_000, local=False) == pytest.approx(0.205)


def test_reading_kept_files_through_the_file_filter_costs_its_share():
    model = replace(MODEL, filtered_scan_share=0.5)
    e = model.estimate(100, 1_000_000_000, best_share=0.5, sure_share=0.8, build_bytes=1000, build_local=True)
    # Keeping half the files through a filter costing 50% more saves a quarter of the scan; keeping
    # 80% saves nothing.
    assert e.best_saving_s == pytest.approx(e.scan_s * 0.25) and e.sure_saving_s < 0
    assert not e.worth_applying((100, 1_000_000_000), (80, 800_000_000), model)[0]


def test_a_tiny_probe_is_not_worth_a_build():
    e = MODEL.estimate(4, 40_000, best_share=0.25, sure_share=1.0, build_bytes=10_000, build_local=True)
    worth, why = e.worth_building()
    assert not worth
    assert why.startswith("by cost: pruning saves at most")
    assert e.best_saving_s < e.cost_s


def test_a_large_clustered_probe_with_a_cheap_build_is_worth_it():
    e = MODEL.estimate(1000, 10_000_000_000, best_share=0.01, sure_share=1.0, build_bytes=5_000_000,
                       build_local=True)
    assert e.worth_building() == (True, "")


def test_an_expensive_build_needs_a_sure_saving():
    # The best case pays, but the Spark job is more than 10% of the scan and nothing is sure.
    e = MODEL.estimate(20, 200_000_000, best_share=0.05, sure_share=1.0, build_bytes=50_000_000, build_local=False)
    worth, why = e.worth_building()
    assert not worth and "more than 10% of the probe's scan" in why
    # The build's key range rules out 80% from the stats alone: that pays for the job.
    sure = MODEL.estimate(20, 200_000_000, best_share=0.05, sure_share=0.2, build_bytes=50_000_000,
                          build_local=False)
    assert sure.worth_building() == (True, "")


def test_after_the_build_the_exact_files_decide():
    e = MODEL.estimate(100, 1_000_000_000, best_share=0.01, sure_share=1.0, build_bytes=1000, build_local=True)
    assert e.worth_applying((100, 1_000_000_000), (10, 100_000_000), MODEL) == (True, "")
    keep, why = e.worth_applying((100, 1_000_000_000), (100, 999_000_000), MODEL)
    assert not keep and why.startswith("by cost after the build: its keys keep 100 of 100 files")


def test_shares_are_weighted_by_bytes_and_clamped():
    assert combined_share([(0.1, 900), (1.0, 100)]) == pytest.approx(0.19)
    assert combined_share([]) == 1.0
    e = MODEL.estimate(1, 1, best_share=-0.5, sure_share=3.0, build_bytes=0, build_local=True)
    assert (e.best_share, e.sure_share) == (0.0, 1.0)
    assert set(e.to_dict()) >= {"scan_s", "build_s", "apply_s", "best_saving_s", "sure_saving_s"}


def test_a_row_filter_only_build_must_be_cheap_next_to_the_scan():
    # TPC-DS q7 at sf=1: customer_demographics read in the driver (~80 MB) for a row filter on a
    # store_sales scan of ~0.1 s is not worth it; a 100 KB dimension is.
    model = CostModel()
    big = model.estimate(59, 212_000_000, 1.0, 1.0, build_bytes=80_000_000, build_local=True)
    worth, why = big.worth_filtering_rows()
    assert not worth and why.startswith("by cost: its keys could only filter the probe's rows")
    small = model.estimate(59, 212_000_000, 1.0, 1.0, build_bytes=100_000, build_local=True)
    assert small.worth_filtering_rows() == (True, "")
