"""compare on figures imported from nccl-tests logs: a real 2×H200 log against itself is SAME (exit 0); the
same log with every bandwidth 10 % lower (time 1/0.9 longer) is WORSE (exit 1), row by row; unless it was a
graph run (-G) against an eager one: then no row is one figure, and none is judged."""

import json
import re
from pathlib import Path

import pytest

from gpubench.cli import main

FIX = Path(__file__).parent / "fixtures" / "nccl-tests" / "nt-2.19.6-all_reduce-h200x2.txt"
_ROW = re.compile(r"^(\s*\d+\s+\d+\s+\S+\s+\S+\s+-?\d+)((?:\s+\S+){8})\s*$")


def _slower(text: str, factor: float) -> str:
    """The log with each placement's time divided and algbw, busbw multiplied by ``factor``."""
    out = []
    for line in text.splitlines():
        m = _ROW.match(line)
        if m:
            f = m.group(2).split()
            for p in (0, 4):  # out of place, in place: time algbw busbw #wrong
                f[p] = f"{float(f[p]) / factor:.2f}"
                f[p + 1] = f"{float(f[p + 1]) * factor:.2f}"
                f[p + 2] = f"{float(f[p + 2]) * factor:.2f}"
            line = m.group(1) + "".join(f"  {x:>7}" for x in f)
        out.append(line)
    return "\n".join(out) + "\n"


def _import(tmp_path, log: Path, name: str) -> Path:
    assert main(["import", "nccl-tests", str(log), "--out", str(tmp_path / name), "--cluster", "t"]) == 0
    (run,) = (tmp_path / name / "t").glob("*")
    return run


def test_imported_logs_busbw_10_percent_lower_is_worse_and_itself_is_same(tmp_path, capsys):
    slow_log = tmp_path / "slow.txt"
    # The slow side also claims a build against NCCL 2.18 headers (cudaMalloc'd buffers).
    slow_log.write_text(_slower(FIX.read_text(), 0.9).replace("nccl-headers=22809", "nccl-headers=21803"))
    assert slow_log.read_text().count("\n") == FIX.read_text().count("\n")
    base, slow = _import(tmp_path, FIX, "base"), _import(tmp_path, slow_log, "slow")
    capsys.readouterr()
    assert main(["compare", str(base), str(base), "--format", "json"]) == 0
    same = json.loads(capsys.readouterr().out)
    assert same["rows"] and {r["verdict"] for r in same["rows"]} == {"SAME"}
    assert main(["compare", str(base), str(slow), "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    rows = report["rows"]
    # What the logs tell of how each measured is listed among the settings that differ.
    assert {"alloc: nccl → cudaMalloc"} <= set(report["setting_differences"])
    busbw = [r for r in rows if r["metric"] == "busbw"]
    assert busbw and all(r["verdict"] == "WORSE" for r in busbw)
    assert all(abs(r["ratio"] - 0.9) < 0.002 for r in busbw)  # two printed decimals
    assert all(r["verdict"] == "WORSE" for r in rows if r["metric"] in ("time", "algbw"))


def test_a_graph_run_against_an_eager_run_is_not_judged(tmp_path, capsys):
    graph_log = tmp_path / "graph.txt"
    graph_log.write_text(_slower(FIX.read_text(), 0.9).replace("graph: 0", "graph: 1"))
    base, graph = _import(tmp_path, FIX, "base"), _import(tmp_path, graph_log, "graph")
    capsys.readouterr()
    assert main(["compare", str(base), str(graph), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "graph: False → True" in report["setting_differences"]
    compared = [r for r in report["rows"] if r["status"] == "compared"]
    assert compared and {r["verdict"] for r in compared} == {"UNKNOWN"}
    assert all("graph: False → True" in r["note"] for r in compared)


GATHER = Path(__file__).parent / "fixtures" / "nccl-tests" / "public" / \
    "nccl-tests-issue350-a100-2node-gather-linear-steps-info-lines.txt"


def test_an_imported_gather_run_compares_reports_and_exports_as_any_collective(tmp_path, capsys):
    # A real 2-node gather_perf log (NVIDIA/nccl-tests#350) and the same with every bandwidth 10 % lower.
    text = "\n".join(ln for ln in GATHER.read_text().splitlines() if not ln.startswith("## fixture:")) + "\n"
    (tmp_path / "gather.txt").write_text(text)
    slow = []
    for line in _slower(text, 0.9).splitlines():  # busbw from the new algbw: gather's (n - 1) / n on 2 ranks
        m = _ROW.match(line)
        if m:
            f = m.group(2).split()
            for p in (0, 4):
                f[p + 2] = f"{float(f[p + 1]) / 2:.2f}"
            line = m.group(1) + "".join(f"  {x:>7}" for x in f)
        slow.append(line)
    (tmp_path / "slow.txt").write_text("\n".join(slow) + "\n")
    base, slow = _import(tmp_path, tmp_path / "gather.txt", "base"), _import(tmp_path, tmp_path / "slow.txt", "slow")
    capsys.readouterr()
    assert main(["compare", str(base), str(slow), "--format", "json"]) == 1
    rows = json.loads(capsys.readouterr().out)["rows"]
    busbw = [r for r in rows if r["metric"] == "busbw"]
    assert len(busbw) == 85 * 2 and all(r["verdict"] == "WORSE" for r in busbw)
    assert main(["report", str(base), str(slow), "--out", str(tmp_path / "page")]) == 0
    page = "\n".join(p.read_text() for p in (tmp_path / "page").rglob("*.html"))
    assert "gather" in page
    assert main(["export", str(slow), "--format", "pytest-benchmark", "--out", str(tmp_path / "e.json")]) == 0
    assert "gather" in (tmp_path / "e.json").read_text()
