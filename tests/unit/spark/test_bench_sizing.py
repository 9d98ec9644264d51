"""benchmarks/spark_pipeline.py sizes its large run from the small one's window time
(issue 16: Spark SQL's window query runs at least 20 s)."""

import importlib.util
import os

import pytest

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks",
                     "spark_pipeline.py")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_spark_pipeline", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rows_scale_with_the_wanted_time_plus_a_margin_rounded_up(bench):
    assert bench.rows_for(20, 1_000_000, 3.1) == 8_000_000   # 7.1M -> 8M
    assert bench.rows_for(20, 1_000_000, 2.2) == 10_000_000  # exactly 10M stays 10M
    assert bench.rows_for(20, 2_000_000, 2.2, margin=1.0) == 19_000_000  # 18.2M -> 19M


def test_a_size_already_long_enough_is_kept_at_the_smallest_step(bench):
    assert bench.rows_for(20, 1_000_000, 60.0) == 1_000_000
    assert bench.rows_for(20, 1_000, 60.0, step=1_000) == 1_000


def test_calibration_fits_out_the_fixed_cost_and_stops_at_the_first_long_enough_size(bench):
    def window(rows):  # 1.2 s fixed + 2 s per million rows
        tried.append(rows)
        return 1.2 + 2.0 * rows / 1e6

    tried = []
    rows, seconds = bench.calibrate_rows(window, 1_000_000, window(1_000_000), 20)
    # guess 7M (linear through zero from 3.2 s) -> 15.2 s; the line through both points
    # aims at 22 s: 10.4M -> 11M, 23.2 s
    assert tried[1:] == [7_000_000, 11_000_000]
    assert (rows, seconds) == (11_000_000, pytest.approx(23.2))


def test_calibration_grows_even_when_a_measurement_is_not_longer(bench):
    times = iter([5.0, 4.0, 30.0])
    rows, seconds = bench.calibrate_rows(lambda n: next(times), 1_000_000, 4.0, 20)
    assert rows > 6_000_000 and seconds == 30.0


def test_calibration_gives_up_after_its_tries_with_the_last_size(bench):
    rows, seconds = bench.calibrate_rows(lambda n: 1.0, 1_000_000, 1.0, 20, tries=2)
    assert seconds == 1.0 and rows >= 22_000_000
