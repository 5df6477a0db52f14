"""The roofline: roofs taken from the right rows, points at their analytic intensity, impossible points
flagged, and the CLI around it (a chart written, exit 1 on an impossible point, exit 2 on an empty run)."""

import pandas as pd
import pytest

from gpubench.machine import spec_peaks as peaks
from gpubench import results
from gpubench.report import roofline
from gpubench.cli import main


def row(suite, metric, value, *, dtype="fp32", flops=0, nbytes=1, case="c", status="ok", cv=0.01, **params):
    # cv: a steady figure by default (a roof is set only by figures that spread at most roofline.ROOF_SPREAD)
    return {"suite": suite, "metric": metric, "value": value, "dtype": dtype, "work_flops": flops,
            "work_bytes": nbytes, "case": case, "status": status, "device": "NVIDIA H200", "cv": cv, **params}


def frame(rows):
    return pd.DataFrame(rows)


H200_ROWS = [
    row("elementwise", "bandwidth", 4200.0, op="copy", case="copy fp32"),
    row("elementwise", "bandwidth", 4300.0, op="triad", case="triad fp32"),  # the memory roof: the best op's
    row("elementwise", "bandwidth", 4400.0, op="copy", case="copy bad", status="invalid"),  # never counted
    row("elementwise", "throughput", 0.7, op="triad", flops=2 * 10, nbytes=12 * 10, case="triad fp32"),
    row("elementwise", "throughput", 60.0, op="fma256", flops=512 * 10, nbytes=8 * 10, case="fma256 fp32"),
    row("elementwise", "throughput", float("nan"), op="copy", case="copy fp32"),  # no flops: no point
    row("gemm", "throughput", 680.0, dtype="bf16", flops=2 * 8192**3, nbytes=6 * 8192**2, impl="torch",
        case="bf16 8192"),
    row("gemm", "throughput", 570.0, dtype="bf16", flops=2 * 8192**3, nbytes=6 * 8192**2, impl="triton",
        case="bf16 8192 triton"),
]


def test_roofs_are_the_best_bandwidth_gemm_and_fma_rows_and_specs_come_from_the_table():
    device, all_roofs = roofline.analyze(frame(H200_ROWS))
    by = {r.dtype: r for r in all_roofs}
    assert device == "NVIDIA H200" and set(by) == {"fp32", "bf16"}
    # the best bandwidth sustained, whichever op (a copy-only roof sat under the triad bars and points), of the
    # panel's own dtype: no bf16 bandwidth was measured, so the bf16 panel draws no memory roof of fp32's
    assert by["fp32"].memory_gbps == 4300.0 and by["bf16"].memory_gbps is None
    assert by["bf16"].tensor_tflops == 680.0 and by["bf16"].vector_tflops is None
    assert by["fp32"].vector_tflops == 60.0 and by["fp32"].tensor_tflops is None
    spec = peaks.lookup("NVIDIA H200")
    assert by["bf16"].spec_tensor_tflops == spec.tflops["bf16"] and by["bf16"].spec_memory_gbps == 4800.0
    assert by["fp32"].spec_vector_tflops == spec.vector_tflops["fp32"]
    fp32 = sorted((p.label, p.intensity) for p in by["fp32"].points)
    assert fp32 == [("elementwise fma", 64.0), ("elementwise triad", pytest.approx(1 / 6))]
    assert roofline.violations(all_roofs) == []
    assert all(p.tflops <= ro.measured_roof(p) for ro in all_roofs for p in ro.points)


def test_a_point_whose_own_bytes_moved_faster_raises_the_memory_roof_to_it():
    # a small GEMM whose operands stay in cache: 2 TF/s at 1 FLOP/byte is 2000 GB/s, above the 1000 measured
    rows = [row("elementwise", "bandwidth", 1000.0, op="copy", case="copy"),
            row("gemm", "throughput", 2.0, dtype="fp32", flops=1000, nbytes=1000, impl="torch", case="small")]
    (ro,) = roofline.analyze(frame(rows))[1]
    assert ro.memory_gbps == 2000.0 and ro.measured_roof(ro.points[0]) == pytest.approx(2.0)


def test_a_point_above_its_spec_roof_is_a_measurement_error():
    rows = H200_ROWS + [
        # 1200 TF/s of bf16 GEMM: above the 989.4 dense peak
        row("gemm", "throughput", 1200.0, dtype="bf16", flops=2 * 4096**3, nbytes=6 * 4096**2, impl="torch",
            case="too fast"),
        # a triad at 1/6 FLOP/byte and 1.0 TF/s would need 6 TB/s of memory: above 4.8
        row("elementwise", "throughput", 1.0, op="triad", flops=2, nbytes=12, case="triad too fast"),
    ]
    bad = roofline.violations(roofline.analyze(frame(rows))[1])
    assert sorted(p.case for _, p, _ in bad) == ["too fast", "triad too fast"]
    roof = {p.case: r for _, p, r in bad}
    assert roof["too fast"] == pytest.approx(989.4)
    assert roof["triad too fast"] == pytest.approx(4800 / 6 / 1e3)


def test_unknown_device_has_no_spec_roofs_and_flags_nothing():
    rows = [dict(r, device="Fake GPU") for r in H200_ROWS]
    _, all_roofs = roofline.analyze(frame(rows))
    assert all(r.spec_memory_gbps is None and r.spec_tensor_tflops is None for r in all_roofs)
    assert roofline.violations(all_roofs) == []


def saved_run(tmp_path, rows):
    run = tmp_path / "run"
    run.mkdir()
    df = pd.DataFrame([dict(r, run_id="r1", suite_version=1, unit="TFLOP/s", better="higher") for r in rows])
    results.save(results.frame(df.to_dict("records")), run / "x.parquet")
    return run


def test_cli_writes_the_chart_and_exits_by_what_it_found(tmp_path, capsys):
    fake = tmp_path / "fake"
    assert main(["run", "--suite", "elementwise,gemm", "--backend", "fake", "--quick", "--out", str(fake),
                 "--cluster", "t", "--filter", "op=(copy|triad)|shape=square,dtype=fp32,layout=NN"]) == 0
    run = next((fake / "t").iterdir())
    out = tmp_path / "chart.png"
    assert main(["roofline", str(run), "--out", str(out)]) == 0
    assert out.stat().st_size > 10_000 and out.read_bytes()[:4] == b"\x89PNG"
    assert "chart:" in capsys.readouterr().out

    bad = saved_run(tmp_path, H200_ROWS + [row("gemm", "throughput", 1200.0, dtype="bf16", flops=2 * 4096**3,
                                                   nbytes=6 * 4096**2, impl="torch", case="too fast")])
    assert main(["roofline", str(bad)]) == 1
    assert "measurement error: bf16 gemm torch too fast" in capsys.readouterr().out
    assert (bad / "roofline.png").exists()


def test_cli_refuses_a_run_without_points_and_a_bad_out(tmp_path, capsys):
    empty = saved_run(tmp_path, [row("elementwise", "bandwidth", 4200.0, op="copy")])
    assert main(["roofline", str(empty)]) == 2
    assert "no elementwise or gemm throughput rows" in capsys.readouterr().err
    run = saved_run(tmp_path / "b", H200_ROWS) if (tmp_path / "b").mkdir() is None else None
    assert main(["roofline", str(run), "--out", str(tmp_path / "nodir" / "x.png")]) == 2
    assert main(["roofline", str(tmp_path / "missing")]) == 2


# A loaded CPU (issue 73, item 6): bf16's one steady op, dot, reads far under its noisy ones; fp32's noisy copy
# reads under its steady triad; a noisy GEMM reads above fp16's steady one; a noisy GEMM whose operands stayed in
# cache moved its bytes faster than fp64's steady copy.
LOADED = [
    row("elementwise", "bandwidth", 1.065, dtype="bf16", op="dot", case="dot bf16"),
    row("elementwise", "bandwidth", 11.0, dtype="bf16", op="copy", case="copy bf16", cv=0.3),
    row("elementwise", "bandwidth", 8.2, dtype="bf16", op="triad", case="triad bf16", cv=0.2),
    row("elementwise", "bandwidth", 9.0, dtype="bf16", op="fill", case="fill bf16", cv=0.25),
    row("elementwise", "throughput", 1.065e-3 / 2, dtype="bf16", flops=2, nbytes=4, op="dot", case="dot bf16"),
    row("elementwise", "throughput", 8.2e-3 / 3, dtype="bf16", flops=2, nbytes=6, op="triad", case="triad bf16",
        cv=0.2),
    row("elementwise", "bandwidth", 20.0, op="triad", case="triad fp32"),
    row("elementwise", "bandwidth", 19.0, op="copy", case="copy fp32", cv=0.3),
    row("elementwise", "throughput", 20e-3 / 6, flops=2, nbytes=12, op="triad", case="triad fp32"),
    row("gemm", "throughput", 600.0, dtype="fp16", flops=2 * 8192**3, nbytes=6 * 8192**2, impl="torch", case="a"),
    row("gemm", "throughput", 700.0, dtype="fp16", flops=2 * 8192**3, nbytes=6 * 8192**2, impl="triton", case="b",
        cv=0.2),
    row("elementwise", "throughput", 50.0, dtype="fp16", flops=512, nbytes=4, op="fma256", case="fma256"),
    row("elementwise", "throughput", 40.0, dtype="fp16", flops=256, nbytes=4, op="fma128", case="fma128", cv=0.2),
    row("elementwise", "bandwidth", 1000.0, dtype="fp64", op="copy", case="copy fp64"),
    row("gemm", "throughput", 2.0, dtype="fp64", flops=1000, nbytes=1000, impl="torch", case="small", cv=0.2),
]


def test_no_roof_is_set_under_a_figure_it_is_chosen_from_and_why_is_said():
    df = frame(LOADED)
    _, all_roofs = roofline.analyze(df)
    by = {r.dtype: r for r in all_roofs}
    # every point, steady or noisy, under the measured roofs drawn at its intensity
    assert all(p.tflops <= ro.measured_roof(p) * (1 + 1e-9) for ro in all_roofs for p in ro.points)
    assert by["bf16"].memory_gbps is None and roofline.memory_roofs(df) == {"fp32": 20.0, "fp64": 1000.0}
    assert by["fp32"].memory_gbps == pytest.approx(20.0) and by["fp32"].notes() == []  # a noisy op under the steady
    assert by["fp16"].tensor_tflops is None and by["fp16"].vector_tflops == 50.0
    assert by["fp64"].memory_gbps is None
    assert by["bf16"].notes() == ["bf16: no measured memory roof: the steady figures read at most 1.065 GB/s "
                                  "(elementwise dot), under 11 GB/s of elementwise copy, whose samples spread 30% "
                                  "(a roof needs 5% or less)"]
    assert by["fp16"].notes() == ["fp16: no measured tensor roof: the steady figures read at most 600 TF/s (gemm "
                                  "torch), under 700 TF/s of gemm triton, whose samples spread 20% (a roof needs 5% "
                                  "or less)"]
    assert "under 2,000 GB/s of gemm torch" in by["fp64"].notes()[0]


def test_cli_prints_no_roof_under_a_point_and_says_why_at_80_columns(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    run = saved_run(tmp_path, [dict(r, device="AMD EPYC 7B13") for r in LOADED if r["dtype"] in ("bf16", "fp32")])
    assert main(["roofline", str(run), "--out", str(tmp_path / "chart.png")]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80, out
    cells = {line.split("│")[1].strip(): line.split("│")[3].strip() for line in out.splitlines()
             if line.startswith("│") and line.split("│")[1].strip()}
    assert cells == {"bf16": "— / —", "fp32": "20.0 GB/s / —"}, out
    said = " ".join(out.split())
    assert ("bf16: no measured memory roof: the steady figures read at most 1.065 GB/s (elementwise dot), under 11 "
            "GB/s of elementwise copy, whose samples spread 30% (a roof needs 5% or less)") in said, out
