"""The verdict rule, the rank test behind it (gpubench.timing.stats, scipy's), and thresholds files, without run
directories."""

import itertools
import math

import pytest

from gpubench.timing import stats
from gpubench.compare import thresholds
from gpubench.compare.verdict import BETTER, SAME, UNKNOWN, WORSE, judge
from gpubench.errors import UsageError

TIGHT = [100.0, 100.1, 99.9, 100.05, 99.95]  # cv 0.08 %
NOISE = [0.85, 1.15, 0.95, 1.10, 0.90, 1.05, 1.0, 0.92]  # ±15 %


def times(samples, k):
    return [x * k for x in samples]


@pytest.mark.parametrize("better,factor", [("higher", 0.95), ("lower", 1.05)])
def test_a_5_percent_shift_with_tight_samples_is_worse(better, factor):
    r = judge(TIGHT, times(TIGHT, factor), better, 0.05)
    assert r["verdict"] == WORSE
    assert r["basis"] == "samples" and r["p_value"] <= 0.01
    assert r["change"] == pytest.approx(factor - 1)


def test_the_same_shift_inside_noise_is_not_worse():
    base = times(NOISE, 100)
    cur = [x * 0.95 for x in reversed(base)]
    r = judge(base, cur, "higher", 0.05)
    assert r["verdict"] == UNKNOWN
    assert r["p_value"] > 0.01 and "within noise" in r["note"]


def test_a_shift_below_the_threshold_is_same_even_when_significant():
    r = judge(TIGHT, times(TIGHT, 0.98), "higher", 0.05)
    assert r["verdict"] == SAME and r["p_value"] <= 0.01
    assert "within the threshold" in r["note"]


@pytest.mark.parametrize("better,factor", [("higher", 1.10), ("lower", 0.90)])
def test_improvements_are_better(better, factor):
    assert judge(TIGHT, times(TIGHT, factor), better, 0.05)["verdict"] == BETTER


def test_direction_comes_from_the_better_column():
    cur = times(TIGHT, 1.08)
    assert judge(TIGHT, cur, "lower", 0.05)["verdict"] == WORSE  # a time went up
    assert judge(TIGHT, cur, "higher", 0.05)["verdict"] == BETTER  # a bandwidth went up
    assert judge(TIGHT, cur, None, 0.05)["verdict"] == UNKNOWN


def test_one_sample_per_side_lets_the_threshold_alone_decide():
    worse = judge([100.0], [93.0], "higher", 0.05)
    assert worse["verdict"] == WORSE and worse["basis"] == "threshold-only"
    assert math.isnan(worse["p_value"]) and "threshold alone" in worse["note"]
    assert judge([100.0], [96.0], "higher", 0.05)["verdict"] == SAME
    # a derived figure: a value, no samples
    derived = judge([], [], "lower", 0.05, baseline_value=2.0, current_value=2.2)
    assert derived["verdict"] == WORSE and derived["basis"] == "threshold-only"


def test_a_threshold_is_met_despite_binary_rounding():
    # 0.95 * 94.37... / 94.37... - 1 is not exactly -0.05 in binary
    b = [94.37482224437976] * 5
    assert judge(b, times(b, 0.95), "higher", 0.05)["verdict"] == WORSE


def test_no_figure_or_a_zero_baseline_is_unknown():
    assert judge([0.0, 0.0], [1.0, 1.0], "higher", 0.05)["verdict"] == UNKNOWN
    assert judge([math.nan] * 3, [1.0] * 3, "higher", 0.05)["verdict"] == UNKNOWN


def u_of(x, y):
    """U of x by counting: pairs with x_i > y_j, ties one half."""
    return sum((a > b) + 0.5 * (a == b) for a in x for b in y)


def brute_force_p(x, y):
    """Two-sided exact p by enumerating every split of the pooled values."""
    pooled = list(x) + list(y)
    m, n = len(x), len(y)
    u = u_of(x, y)
    observed = max(u, m * n - u)
    hits = total = 0
    for idx in itertools.combinations(range(m + n), m):
        xs = [pooled[i] for i in idx]
        ys = [pooled[i] for i in range(m + n) if i not in idx]
        uu = u_of(xs, ys)
        hits += max(uu, m * n - uu) >= observed - 1e-9
        total += 1
    return hits / total


@pytest.mark.parametrize("x,y", [
    ([19, 22, 16, 29, 24], [20, 11, 17, 12]),  # scipy.stats.mannwhitneyu's docs example: p = 0.1111
    ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]),
    ([3.1, 0.5, 2.2, 9.0], [1.5, 4.4, 6.1]),
])
def test_exact_p_matches_enumeration(x, y):
    assert stats.mann_whitney(x, y)[1] == pytest.approx(brute_force_p(x, y))


def test_docs_example_p_value():
    u, p = stats.mann_whitney([19, 22, 16, 29, 24], [20, 11, 17, 12])
    assert u == 17 and p == pytest.approx(0.1111, abs=1e-4)


def test_best_p_is_the_floor_of_small_samples():
    assert stats.best_p(3, 3) == pytest.approx(0.1)
    assert stats.best_p(5, 5) == pytest.approx(2 / 252)
    # what the test gives for fully separated samples is that floor
    assert stats.mann_whitney([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])[1] == pytest.approx(stats.best_p(3, 3))


def test_ties_and_identical_samples():
    assert stats.mann_whitney([1.0] * 5, [1.0] * 5)[1] == 1.0
    p = stats.mann_whitney([1.0] * 5, [1.05] * 5)[1]
    assert p < 0.01  # identical within each side, apart between them: as the fake backend's runs are
    assert math.isnan(stats.mann_whitney([], [1.0])[1])


def test_threshold_lookup_order(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text("[default]\nthreshold = 0.07\n\n[comm]\nthreshold = 0.04\nbusbw = 0.03\n")
    th = thresholds.load(f)
    assert th.for_row("comm", "busbw") == 0.03
    assert th.for_row("comm", "time") == 0.04
    assert th.for_row("gemm", "throughput") == 0.07
    assert thresholds.Thresholds().for_row("x", "y") == 0.05


@pytest.mark.parametrize("text,needle", [
    ("[comm]\nbusbw = 5\n", "thresholds are fractions"),
    ("[comm]\nbusbw = 'x'\n", "not a number"),
    ("[default]\nlimit = 0.1\n", "takes only 'threshold'"),
    ("busbw = 0.1\n", "is not a [table]"),
    ("[comm\n", "not valid TOML"),
])
def test_bad_thresholds_files_say_what_to_do(tmp_path, text, needle):
    f = tmp_path / "t.toml"
    f.write_text(text)
    with pytest.raises(UsageError, match=needle.replace("[", r"\[")):
        thresholds.load(f)


def test_thresholds_round_trip_through_toml(tmp_path):
    th = thresholds.Thresholds(default=0.06, suites={"elementwise": {"bandwidth": 0.012, "time": 0.02},
                                                    "my suite": {"a.b": 0.3}})
    f = tmp_path / "t.toml"
    f.write_text(thresholds.dumps(th, "header line\nsecond", {("elementwise", "time"): "spread 1%"}))
    back = thresholds.load(f)
    assert back.default == 0.06 and back.suites == th.suites


def test_the_spread_factors_are_the_simulated_99th_percentile():
    """Each tabulated factor lies between the 99th percentiles of |new − median| / range for k normal and k
    Student-t (3 degrees of freedom) draws, as margin._SPREAD_FACTOR's comment says (20 000 draws here; the
    table's 200 000 and more narrow the bounds, so they are widened by 10 %)."""
    import numpy as np

    from gpubench.compare import margin as v

    rng = np.random.default_rng(1)
    for k, factor in v._SPREAD_FACTOR.items():
        bounds = []
        for draw in (rng.standard_normal, lambda size: rng.standard_t(3, size)):
            x, y = draw((20_000, k)), draw(20_000)
            bounds.append(np.percentile(np.abs(y - np.median(x, axis=1)) / np.ptp(x, axis=1), 99))
        assert 0.9 * min(bounds) <= factor <= 1.1 * max(bounds), (k, factor, bounds)
    assert v.spread_factor(11) == v._SPREAD_FACTOR[10] and v.spread_factor(200) == v._SPREAD_FACTOR[60]


def test_the_pooled_spread_factors_are_the_simulated_99th_percentile():
    """Each pooled factor (margin._POOLED_FACTOR: R window runs of m processes against a run of m, the processes
    of a run sharing a quarter of their variance) is the larger of the simulated 99th percentiles for normal and
    Student-t draws (20 000 draws here against the table's 200 000: within 12 %)."""
    import numpy as np

    from gpubench.compare import margin as v

    rng = np.random.default_rng(5)
    rho, n = 0.25, 20_000
    for m, table in v._POOLED_FACTOR.items():
        for r, factor in table.items():
            found = []
            for draw in (rng.standard_normal, lambda size: rng.standard_t(3, size) / np.sqrt(3)):
                w = (draw((n, r, 1)) * rho ** 0.5 + draw((n, r, m)) * (1 - rho) ** 0.5).reshape(n, r * m)
                c = np.median(draw((n, 1)) * rho ** 0.5 + draw((n, m)) * (1 - rho) ** 0.5, axis=1)
                found.append(np.percentile(np.abs(c - np.median(w, axis=1)) / np.ptp(w, axis=1), 99))
            assert 0.88 * max(found) <= factor <= 1.12 * max(found), (m, r, factor, found)
            # fewer values than one draw each would hold: never a larger factor than the single-draw table's
            assert factor <= v.spread_factor(r * m), (m, r)
