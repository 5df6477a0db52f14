"""Across systems: compare refuses unless --cross-cluster, which then reports ratios and % of spec peak."""

import json

import pytest
from test_compare_helpers import base_run, cli, copy_run, device_rows, one_line_error, set_system

from gpubench.compare import cross

H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"


@pytest.fixture
def clusters(tmp_path_factory, tmp_path):
    base = base_run(tmp_path_factory)
    a = tmp_path / "results" / "clusterA"
    b = tmp_path / "results" / "clusterB"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    copy_run(base, a, "20990101T000000Z-0000a1", lambda df: device_rows(df, H100),
             set_system(H100, gpu_count=8, driver_version="550.54.15", cluster="clusterA"))
    copy_run(base, b, "20990101T000000Z-0000b1", lambda df: device_rows(df, H200),
             set_system(H200, gpu_count=8, driver_version="550.54.15", cluster="clusterB"))
    return a, b


def test_other_systems_are_refused_without_cross_cluster(capsys, clusters):
    a, b = clusters
    code, _, err = cli(capsys, "compare", a, b)
    assert code == 2
    line = one_line_error(err)
    assert "pass --cross-cluster" in line and f"gpu_model: {H100} → {H200}" in line


def test_a_driver_change_is_another_system(capsys, clusters, tmp_path):
    a, _ = clusters
    run = next(a.iterdir())
    c = tmp_path / "c"
    c.mkdir()
    other = copy_run(run, c, "20990102T000000Z-0000c1", meta=set_system(H100, driver_version="560.28.03"))
    code, _, err = cli(capsys, "compare", run, other)
    assert code == 2 and "driver_version: 550.54.15 → 560.28.03" in one_line_error(err)


def test_cross_cluster_reports_ratios_and_percent_of_each_sides_peak(capsys, clusters):
    a, b = clusters
    code, out, err = cli(capsys, "compare", a, b, "--cross-cluster", "--format", "json")
    assert code in (0, 1), err
    doc = json.loads(out)
    assert doc["cross_cluster"] is True
    assert doc["system_differences"] == [f"gpu_model: {H100} → {H200}"]
    assert H100 in doc["baseline"]["description"] and "×8" in doc["baseline"]["description"]
    assert H200 in doc["current"]["description"] and "cluster clusterB" in doc["current"]["description"]
    bw = [r for r in doc["rows"] if r["metric"] == "bandwidth"]
    assert len(bw) == 2
    for r in bw:
        assert r["ratio"] == pytest.approx(r["current"] / r["baseline"])
        assert r["baseline_pct_peak"] == pytest.approx(100 * r["baseline"] / 3350.0)
        assert r["current_pct_peak"] == pytest.approx(100 * r["current"] / 4800.0)
    assert all(r["baseline_pct_peak"] is None for r in doc["rows"] if r["metric"] != "bandwidth")

    code, out, _ = cli(capsys, "compare", a, b, "--cross-cluster")
    assert "cross-cluster comparison" in out and H100 in out and H200 in out
    assert "% peak" in out


def test_spec_peaks_of_gemm_and_elementwise_rows():
    gemm = {"suite": "gemm", "metric": "throughput", "unit": "TFLOP/s", "dtype": "bf16", "device": H100}
    assert cross.spec_peak(gemm) == 989.4
    assert cross.pct_of_peak(gemm, 494.7) == pytest.approx(50.0)
    assert cross.spec_peak({**gemm, "dtype": "fp8", "device": "NVIDIA A100-SXM4-80GB"}) is None  # A100: no FP8
    ew = {"suite": "elementwise", "metric": "bandwidth", "unit": "GB/s", "device": H200}
    assert cross.spec_peak(ew) == 4800.0
    assert cross.spec_peak({**ew, "metric": "time", "unit": "us"}) is None
    assert cross.spec_peak({**ew, "device": "Fake GPU"}) is None
