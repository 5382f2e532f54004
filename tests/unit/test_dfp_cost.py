"""Dynamic file pruning's cost model: the decision table, without Spark."""
from __future__ import annotations

from dataclasses import replace

import pytest

from skiplake.skipping.dfp_cost import CostModel, combined_share

MODEL = CostModel(parallelism=2, scan_bytes_per_second=100_000_000, file_open_bytes=1_000_000, build_job_seconds=0.2,
                  local_build_seconds=0.005, local_row_seconds=1e-8, apply_seconds=0.03,
                  speculative_share=0.1, speculative_seconds=0.0, filtered_scan_share=0.0, reused_builds=False)


def _estimate(files: int, bytes_: int, best: float, sure: float, build_bytes: int, local: bool,
              model: CostModel = MODEL):
    return model.estimate(files, bytes_, best, sure, build_bytes, build_bytes, local)


def test_scan_and_build_seconds_follow_files_bytes_and_cores():
    # 10 files and 200 MB over 2 tasks: (200 MB + 10 * 1 MB) / (100 MB/s * 2).
    assert MODEL.scan_seconds(10, 200_000_000) == pytest.approx(1.05)
    # In the driver by rows; as a Spark job by bytes at the scan rate.
    assert MODEL.build_seconds(1_000_000, 1_000_000, local=True) == pytest.approx(0.015)
    assert MODEL.build_seconds(1_000_000, 1_000_000, local=False) == pytest.approx(0.205)
    # A Spark job's build whose rows serve the query costs the job only: its scan is paid once.
    assert replace(MODEL, reused_builds=True).build_seconds(1_000_000, 1_000_000, local=False) == pytest.approx(0.2)


def test_reading_kept_files_through_the_file_filter_costs_its_share():
    model = replace(MODEL, filtered_scan_share=0.5)
    e = _estimate(100, 1_000_000_000, 0.5, 0.8, 1000, True, model)
    # Keeping half the files through a filter costing 50% more saves a quarter of the scan; keeping
    # 80% saves nothing.
    assert e.best_saving_s == pytest.approx(e.scan_s * 0.25) and e.sure_saving_s < 0
    assert not e.worth_applying((100, 1_000_000_000), (80, 800_000_000), model)[0]


def test_a_tiny_probe_is_not_worth_a_build():
    e = _estimate(4, 40_000, 0.25, 1.0, 10_000, True)
    worth, why = e.worth_building()
    assert not worth
    assert why.startswith("by cost: pruning saves at most")
    assert e.best_saving_s < e.cost_s


def test_a_large_clustered_probe_with_a_cheap_build_is_worth_it():
    e = _estimate(1000, 10_000_000_000, 0.01, 1.0, 500_000, True)
    assert e.worth_building() == (True, "")


def test_an_expensive_build_needs_a_sure_saving():
    # The best case pays, but the Spark job is more than 10% of the scan and nothing is sure.
    e = _estimate(20, 200_000_000, 0.05, 1.0, 50_000_000, False)
    worth, why = e.worth_building()
    assert not worth and "more than a build not sure to pay may cost" in why
    # The build's key range rules out 80% from the stats alone: that pays for the job.
    assert _estimate(20, 200_000_000, 0.05, 0.2, 50_000_000, False).worth_building() == (True, "")
    # A build of a few milliseconds may be speculative whatever the scan.
    cheap = replace(MODEL, speculative_seconds=0.025)
    assert _estimate(20, 200_000_000, 0.05, 1.0, 1_000_000, True, cheap).worth_building() == (True, "")


def test_after_the_build_the_exact_files_decide():
    e = _estimate(100, 1_000_000_000, 0.01, 1.0, 1000, True)
    assert e.worth_applying((100, 1_000_000_000), (10, 100_000_000), MODEL) == (True, "")
    keep, why = e.worth_applying((100, 1_000_000_000), (100, 999_000_000), MODEL)
    assert not keep and why.startswith("by cost after the build: its keys keep 100 of 100 files")


def test_shares_are_weighted_by_bytes_and_clamped():
    assert combined_share([(0.1, 900), (1.0, 100)]) == pytest.approx(0.19)
    assert combined_share([]) == 1.0
    e = _estimate(1, 1, -0.5, 3.0, 0, True)
    assert (e.best_share, e.sure_share) == (0.0, 1.0)
    assert set(e.to_dict()) >= {"scan_s", "build_s", "apply_s", "best_saving_s", "sure_saving_s"}


def test_a_row_filter_only_build_must_be_cheap_next_to_the_scan():
    # TPC-DS q7 at sf=1: customer_demographics (1.9M rows) read in the driver for a row filter on
    # store_sales's 59 files is not worth it; store (12 rows) is.
    model = CostModel()
    big = model.estimate(59, 212_000_000, 1.0, 1.0, 8_000_000, 1_920_800, True)
    worth, why = big.worth_filtering_rows()
    assert not worth and why.startswith("by cost: its keys could only filter the probe's rows")
    small = model.estimate(59, 212_000_000, 1.0, 1.0, 10_000, 12, True)
    assert small.worth_filtering_rows() == (True, "")
