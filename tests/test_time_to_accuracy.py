"""benchmarks/time_to_accuracy.py's pure helpers: the clock that stops while evaluating, the time to a threshold, the
mean and its standard error. (Nothing here times anything: the benchmark's numbers are its own to report.)"""

import math
import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from grpo_step import steady_s, unpaused  # noqa: E402
from time_to_accuracy import mean_curve, mean_se, series, time_to  # noqa: E402


def test_the_clock_stops_during_the_pauses_that_began_before():
    pauses = [(10.0, 12.0), (20.0, 25.0)]
    assert unpaused(5.0, pauses) == 5.0
    assert unpaused(11.0, pauses) == 10.0  # inside a pause: stopped at its start
    assert unpaused(15.0, pauses) == 13.0
    assert unpaused(30.0, pauses) == 23.0
    # steps ending at 3, 6 (evaluated 6..7), 10: 3 s each
    assert steady_s([3.0, 6.0, 10.0], [(6.0, 7.0)]) == 3.0
    assert steady_s([1.0, 2.0, 4.0]) == 1.5


def test_an_evaluations_seconds_run_from_the_first_ones_end_leaving_each_out():
    # (start, end, step, accuracy): 100-101 at the start, train to 105, evaluate 105-107, train to 110, evaluate
    evals = [(100.0, 101.0, 0, 0.5), (105.0, 107.0, 5, 0.6), (110.0, 111.0, 10, 0.7)]
    assert series(evals) == [(0.0, 0.5), (4.0, 0.6), (7.0, 0.7)]


def test_the_time_to_a_threshold_is_the_first_point_reaching_it():
    points = [(0.0, 0.5), (4.0, 0.7), (7.0, 0.65), (9.0, 0.8)]
    assert time_to(points, 0.7) == 4.0
    assert time_to(points, 0.75) == 9.0
    assert time_to(points, 0.5) == 0.0
    assert time_to(points, 0.81) is None
    assert time_to([(1.0, (0.7 + 0.8 + 0.9) / 3)], 0.8) == 1.0  # equal means, up to rounding, reach


def test_the_mean_and_its_standard_error():
    mean, se = mean_se([0.7, 0.8, 0.9])
    assert mean == pytest.approx(0.8)
    assert se == pytest.approx(0.1 / math.sqrt(3))
    assert mean_se([0.7]) == (0.7, None)
    assert mean_se([]) == (None, None)


def test_the_seeds_curves_average_point_by_point():
    curves = [[(0.0, 0.5), (2.0, 0.6), (4.0, 0.9)], [(0.0, 0.7), (4.0, 0.8)]]
    assert mean_curve(curves) == [(0.0, 0.6), (3.0, pytest.approx(0.7))]
