"""Logs as people paste them (issue 39): prefixes nobody listed, indented READMEs, fragments of big runs, runs that
died, footers that count per process, %g counts, truncated pastes; and the nccl-tests engine's default timing.

The shapes are built from the real 2 × H200 log (tests/fixtures/nccl-tests/nt-2.19.6-all_reduce-h200x2.txt); the
public logs under tests/fixtures/nccl-tests/public/ are read in test_nccltests_public.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from nccl_stand_in import write_stand_in

from gpubench import results
from gpubench.nccltests.model import ParseError
from gpubench.nccltests.parse_text import parse_text

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures" / "nccl-tests"
REAL = (FIX / "nt-2.19.6-all_reduce-h200x2.txt").read_text().splitlines()


def _rows(run):
    return [(r.size, r.placement, r.time_us, r.algbw, r.busbw, r.wrong) for r in run.rows]


PLAIN = parse_text("\n".join(REAL), "plain.txt")[0]


def _gpubench(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "gpubench", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=dict(os.environ))


@pytest.mark.parametrize("prefix", [
    "(head, rank=0, pid=3808) [1,0]<stdout>:",  # SkyPilot over mpirun
    "2024-05-01T12:00:{:02d}.123456789Z ",  # kubectl logs --timestamps
    "node07: ",  # pdsh
    "[job 1234 task 0] ",
])
def test_a_prefix_on_every_line_is_learnt_and_the_table_read(prefix):
    lines = [prefix.format(i % 60) + ln for i, ln in enumerate(REAL)]
    # other ranks' lines with prefixes of their own, as a launcher interleaves them
    lines.insert(3, "(worker1, rank=1, pid=2211) [1,1]<stderr>: vm:2211 [1] NCCL INFO Bootstrap : Using eth0")
    (run,) = parse_text("\n".join(lines), "p.txt")
    assert _rows(run) == _rows(PLAIN) and run.world_size == 2 and run.collective == "all_reduce"


def test_an_indented_readme_log_with_an_elided_header_is_read_and_says_how_it_found_the_world():
    keep = [ln for ln in REAL if not ln.startswith(("# nccl-tests version", "# nThread", "#  Rank", "# Using"))]
    text = "Results on our box:\n\n" + "\n".join("    [1,0]<stdout>:" + ln for ln in ["...", *keep]) + "\n\nThat's it."
    (run,) = parse_text(text, "readme.md")
    assert _rows(run) == _rows(PLAIN) and run.world_size == 2
    assert run.config["world_size_from"].startswith("busbw / algbw = 1.0000 = 2 (n - 1) / n")


def _fragment(busbw_over_algbw: float, collective_line: bool = True) -> str:
    """A paste that starts at rank 71's device line of a 72-GPU run (5 rows)."""
    head = ["#  Rank 71 Group  0 Pid  40111 on nvl72-18 device  3 [0009:01:00] NVIDIA GB200",
            "#", "# Reducing maxBytes to 48 GiB", "#",
            "#                                                              out-of-place                       in-place          ",
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "]
    rows = []
    for k, size in enumerate((536870912, 1073741824, 2147483648, 4294967296, 8589934592)):
        algbw = 250.0 + 10 * k + 0.37
        busbw = algbw * busbw_over_algbw
        t = size / algbw / 1e3
        rows.append(f"{size:>12d}  {size // 4:>12d}     float     sum      -1  {t:7.1f}  {algbw:6.2f}  {busbw:6.2f}"
                    f"       0  {t:7.1f}  {algbw:6.2f}  {busbw:6.2f}       0")
    start = ["# Collective test starting: all_reduce_perf"] if collective_line else []
    return "\n".join(start + head + rows + ["# Out of bounds values : 0 OK"])


def test_a_fragment_of_a_72_rank_run_gets_its_world_size_from_the_table():
    (run,) = parse_text(_fragment(2 * 71 / 72), "nvl72.txt")
    assert run.world_size == 72 and len(run.rows) == 10 and run.nnodes is None
    assert "2 (n - 1) / n" in run.config["world_size_from"] and "ranks up to 71" in run.config["world_size_from"]
    # without the binary's name the table's shape (a reduction, no root) and its ratio still settle it
    (run,) = parse_text(_fragment(2 * 71 / 72, collective_line=False), "nvl72.txt")
    assert run.world_size == 72 and run.collective == "all_reduce"
    # a ratio no world of 72 or more ranks gives is refused in one line naming --ranks
    with pytest.raises(ParseError, match=r"ranks up to 71.*give --ranks N"):
        parse_text(_fragment(2 * 7 / 8), "bad.txt")
    (run,) = parse_text(_fragment(2 * 7 / 8).replace("Rank 71", "Rank  5"), "eight.txt")
    assert run.world_size == 8


def test_ranks_settles_what_the_table_cannot(tmp_path):
    log = tmp_path / "frag.txt"
    log.write_text(_fragment(2 * 71 / 72))
    proc = _gpubench("import", "nccl-tests", log, "--ranks", "72", "--out", tmp_path / "r", "--cluster", "t")
    assert proc.returncode == 0, proc.stderr
    df = results.load(next((tmp_path / "r" / "t").iterdir()))
    assert set(df["world_size"]) == {72}
    proc = _gpubench("import", "nccl-tests", log, "--ranks", "16", "--out", tmp_path / "r", "--cluster", "u")
    assert proc.returncode == 2 and "--ranks 16, but the log shows rank 71" in proc.stderr


def test_a_run_that_died_is_imported_as_failed_with_its_reason(tmp_path):
    head = [ln for ln in REAL if ln.startswith("#") and "size" not in ln and "(B)" not in ln
            and "out-of-place" not in ln and "Out of bounds" not in ln and "Avg bus" not in ln][:8]
    log = tmp_path / "died.txt"
    log.write_text("\n".join(head + [
        "vm:1797:1823 [0] NCCL INFO NET/IB : No device found.",
        "vm:1797:1823 [0] transport/net_socket.cc:48 NCCL WARN NET/Socket : no interface found",
        "vm:1797:1823 [0] NCCL WARN Bootstrap : no socket interface found",
        "vm: Test NCCL failure common.cu:392 'unhandled system error (run with NCCL_DEBUG=INFO for details) / '",
        " .. vm pid 1797: Test failure common.cu:1279",
    ]))
    proc = _gpubench("import", "nccl-tests", log, "--out", tmp_path / "r", "--cluster", "t")
    assert proc.returncode == 1, proc.stderr
    assert "failed: Test NCCL failure common.cu:392 'unhandled system error" in proc.stdout
    assert "NCCL WARN Bootstrap : no socket interface found" in proc.stdout
    run = next((tmp_path / "r" / "t").iterdir())
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "failed" and "common.cu:392" in meta["failure"]
    assert meta["nccl_warnings"][-1] == "Bootstrap : no socket interface found"
    assert not list(run.glob("*.parquet"))


def test_wrong_counts_printed_with_an_exponent_stay_approximate(tmp_path):
    lines = list(REAL)
    i = next(k for k, ln in enumerate(lines) if ln.lstrip().startswith("1048576 "))
    parts = lines[i].rsplit("0", 1)  # the in-place #wrong, the last field
    lines[i] = parts[0] + "1.04858e+06" + parts[1]
    (run,) = parse_text("\n".join(lines), "g.txt")
    wrong = [r.wrong for r in run.rows if r.size == 1048576 and r.placement == "in"][0]
    assert isinstance(wrong, float) and wrong == 1.04858e6
    log = tmp_path / "g.txt"
    # one process drove both GPUs (nThread 1 nGpus 2): its one wrong result makes the footer's 1
    log.write_text("\n".join(lines).replace("Out of bounds values : 0 OK", "Out of bounds values : 1 FAILED"))
    proc = _gpubench("import", "nccl-tests", log, "--out", tmp_path / "r", "--cluster", "t")
    assert proc.returncode == 1 and "out-of-bounds" not in proc.stderr
    df = results.load(next((tmp_path / "r" / "t").iterdir()))
    msg = df[df["status"] == "invalid"]["message"].iloc[0]
    assert msg.startswith("about 1,048,580 wrong elements"), msg


def test_a_truncated_paste_says_its_rows_do_not_make_the_footers_average(tmp_path):
    rows = [k for k, ln in enumerate(REAL) if ln.lstrip()[:1].isdigit()]
    cut = [ln for k, ln in enumerate(REAL) if k not in rows[-4:]]
    log = tmp_path / "cut.txt"
    log.write_text("\n".join(cut))
    proc = _gpubench("import", "nccl-tests", log, "--out", tmp_path / "r", "--cluster", "t")
    assert proc.returncode == 0, proc.stderr
    assert "rows are missing from this log (a truncated paste?)" in proc.stderr
    whole = tmp_path / "whole.txt"
    whole.write_text("\n".join(REAL))
    proc = _gpubench("import", "nccl-tests", whole, "--out", tmp_path / "r", "--cluster", "u")
    assert proc.returncode == 0 and "truncated" not in proc.stderr


NCCL_HELP_G = "USAGE: all_reduce_perf \n\t[-G,--cudagraph <num graph launches>] \n\t[-h,--help]\n"


@pytest.mark.parametrize("eager", [False, True])
def test_the_nccl_tests_engine_captures_graphs_by_default_and_eager_drops_them(tmp_path, eager):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    write_stand_in(bindir / "all_reduce_perf", FIX / "nt-2.19.6-all_reduce-h200x2.txt", tmp_path / "argv",
                   help_text=NCCL_HELP_G, graph=True)
    proc = _gpubench("run", "--suite", "comm", "--engine", "nccl-tests", "--nccl-tests-dir", bindir,
                     "--collectives", "all_reduce", "--min-bytes", "1M", "--max-bytes", "8G", "--step-factor", "4",
                     "--nproc", "2", "--out", tmp_path / "r", "--cluster", "t", *(["--eager"] * eager))
    assert proc.returncode == 0, proc.stderr[-3000:]
    argv = (tmp_path / "argv").read_text()
    assert ("-G 1" in argv) is (not eager)
    df = results.load(next((tmp_path / "r" / "t").iterdir()))
    assert set(df["graph"]) == {not eager}
