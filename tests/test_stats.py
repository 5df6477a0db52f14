import math

import pytest

from gpubench.timing.stats import STAT_FIELDS, summarize


def test_exact_stats_of_known_samples():
    st = summarize([1.0, 2.0, 3.0, 4.0, 10.0])
    assert st["median"] == 3.0
    assert st["mean"] == 4.0
    assert st["min"] == 1.0 and st["max"] == 10.0
    # sample stdev: deviations -3,-2,-1,0,6 -> squares 50 / (n-1=4) = 12.5
    assert st["stdev"] == pytest.approx(math.sqrt(12.5), rel=1e-15)
    # linear quartiles of 1,2,3,4,10 are 2 and 4
    assert st["iqr"] == 2.0
    assert st["cv"] == pytest.approx(math.sqrt(12.5) / 4.0, rel=1e-15)
    assert st["n"] == 5
    assert set(st) == set(STAT_FIELDS)


def test_one_sample_has_unknown_spread_not_zero():
    st = summarize([7.0])
    assert st["median"] == 7.0 and st["n"] == 1
    assert math.isnan(st["stdev"]) and math.isnan(st["cv"]) and math.isnan(st["iqr"])


def test_no_samples():
    st = summarize([])
    assert st["n"] == 0 and math.isnan(st["median"])
