"""gather, scatter, hypercube and alltoallv logs (issue 75): real published ones (tests/fixtures/nccl-tests/public/,
sources in their headers) and synthetic ones built from nccl-tests' print format where no real log was found, named
as such; the ambiguity gather/scatter leaves; and their rows in the comm table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from nccl_stand_in import write_stand_in

from gpubench import results
from gpubench.nccltests import ParseError, parse_text
from gpubench.suites.comm.importer import comm_rows

PUBLIC = Path(__file__).parent / "fixtures" / "nccl-tests" / "public"
SCATTER = "awsome-dt-p4d-16rank-scatter-srun-label-no-footer.txt"
GATHER = "nccl-tests-issue350-a100-2node-gather-linear-steps-info-lines.txt"


def _published(name: str) -> str:
    return "\n".join(ln for ln in (PUBLIC / name).read_text().splitlines() if not ln.startswith("## fixture:"))


def test_a_table_that_fits_gather_and_scatter_asks_for_the_collective_in_one_line():
    with pytest.raises(ParseError) as e:
        parse_text(_published(SCATTER), SCATTER)
    said = str(e.value)
    assert "gather or scatter" in said and said.endswith("pass --collective NAME") and "\n" not in said
    # a log that names its binary keeps it against --collective
    with pytest.raises(ParseError, match="the log says this run is gather but --collective says scatter"):
        parse_text(_published(GATHER), GATHER, collective="scatter")


@pytest.mark.parametrize("name", ["scatter", "gather"])
def test_once_named_the_16_rank_scatter_table_reads_its_world_from_busbw(name):
    (run,) = parse_text(_published(SCATTER), SCATTER, collective=name)
    assert (run.collective, run.collective_source, run.world_size) == (name, "user", 16)
    assert "(n - 1) / n" in run.config["world_size_from"]
    assert len(run.rows) == 29 * 2 and {r.root for r in run.rows} == {0} and {r.redop for r in run.rows} == {"none"}
    rows = comm_rows(run)
    busbw = {(r["bytes"], r["inplace"]): r["value"] for r in rows if r["metric"] == "busbw"}
    assert busbw[(536870912, False)] == 76.71 and busbw[(2147483648, True)] == 79.63  # as printed
    assert {r["root"] for r in rows} == {0} and {r["count"] for r in rows if r["bytes"] == 64} == {1}


def test_the_gather_sweep_with_linear_steps_and_info_lines_between_its_rows_reads_whole():
    (run,) = parse_text(_published(GATHER), GATHER)
    assert (run.collective, run.collective_source, run.world_size, run.nnodes) == ("gather", "log", 2, 2)
    assert run.config["step_kind"] == "bytes" and run.config["max_bytes_reduced"] == 12703978837
    assert run.nccl_version == "2.16.5+cuda11.8" and run.avg_busbw is None
    sizes = sorted({r.size for r in run.rows})
    assert len(sizes) == 85 and sizes[0] == 128 << 20 and all(b - a == 128 << 20 for a, b in zip(sizes, sizes[1:]))
    rows = comm_rows(run)
    assert {r["collective"] for r in rows} == {"gather"} and {r["root"] for r in rows} == {0}
    assert {r["valid"] for r in rows} == {True}  # #wrong 0 on every placement


# --- nccl-tests 2.19.6's own hypercube_perf and alltoallv_perf on one H100 (a world of one: gpubench run --suite
# comm --engine nccl-tests --nproc 1 --collectives gather,scatter,hypercube,alltoallv --quick, 2026-12-07), the
# logs the engine kept. hypercube prints its redop column empty, which the parser once refused ("a result row
# with 12 fields where the header declares 13").
OURS = Path(__file__).parent / "fixtures" / "nccl-tests"


@pytest.mark.parametrize("name, coll", [("nt-2.19.6-hypercube-h100-world1-empty-redop.txt", "hypercube"),
                                        ("nt-2.19.6-alltoallv-h100-world1.txt", "alltoallv")])
def test_nccl_tests_own_hypercube_and_alltoallv_logs_import(name, coll):
    (run,) = parse_text((OURS / name).read_text(), name)
    assert (run.collective, run.world_size, run.tool) == (coll, 1, "nccl-tests")
    assert {(r.redop, r.root) for r in run.rows} == {(None if coll == "hypercube" else "none", -1)}
    rows = comm_rows(run)
    assert {r["collective"] for r in rows} == {coll} and len(rows) == 2 * 2 * 3 and {r["op"] for r in rows} == {"none"}


# --- synthetic logs: nccl-tests' print format (src/common.cu, src/hypercube.cu, src/alltoallv.cu) filled with
# figures made to its arithmetic; no published hypercube or alltoallv table was found.

def _synthetic(binary: str, world: int, rows: list[tuple[int, int, float, float, float]], *, root: int = -1,
               old: bool = False) -> str:
    """A log of ``binary`` among ``world`` ranks on one host: (size, count, time, algbw, busbw) per row, both
    placements alike; ``old``: the per-test header and error column of nccl-tests before 2.13 (no binary named)."""
    lines = [] if old else [f"# Collective test starting: {binary}"]
    lines += ["# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20"
              " validation: 1", "#", "# Using devices"]
    lines += [f"#   Rank {r:2d} Group  0 Pid {100 + r:6d} on      node1 device {r:2d} [0x{r:02x}] NVIDIA H100"
              for r in range(world)]
    if old:
        lines += ["#", "#       size         count      type     time   algbw   busbw  error     time   algbw   busbw"
                  "  error"]
    else:
        lines += ["#", "#       size         count      type   redop    root     time   algbw   busbw #wrong     time"
                  "   algbw   busbw #wrong"]
    for size, count, time_us, algbw, busbw in rows:
        redop = "" if binary == "hypercube_perf" else "none"  # hypercube prints its redop column empty
        lead = f"{size:12d}  {count:12d}  {'float':>8s}" + ("" if old else f"  {redop:>6s}  {root:6d}")
        block = f"  {time_us:7.1f}  {algbw:6.2f}  {busbw:6.2f}  " + ("0e+00" if old else f"{0:6d}")
        lines.append(lead + block * 2)
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.0", "#"]
    return "\n".join(lines) + "\n"


def _hypercube_rows(world: int) -> list[tuple[int, int, float, float, float]]:
    """HyperCubeGetBw: algbw = count × itemsize × (n − 1) / time (count per rank, size = count × n × itemsize),
    busbw = algbw."""
    out = []
    for count in (1 << 16, 1 << 20, 1 << 24):
        size, time_us = count * 4 * world, 10.0 + count / 5000
        algbw = round(count * 4 * (world - 1) / time_us / 1e3, 2)
        out.append((size, count, time_us, algbw, algbw))
    return out


@pytest.mark.parametrize("old", [False, True], ids=["2.13+", "pre-2.13"])
def test_synthetic_hypercube_reads_with_its_algbw_over_the_blocks_received(old):
    text = _synthetic("hypercube_perf", 4, _hypercube_rows(4), old=old)
    if old:  # the old header names no binary and the table fits all_gather as well
        with pytest.raises(ParseError, match="all_gather or hypercube: pass --collective NAME"):
            parse_text(text, "hc.txt")
    (run,) = parse_text(text, "hc.txt", collective="hypercube" if old else None)
    assert (run.collective, run.world_size) == ("hypercube", 4)
    rows = comm_rows(run)  # busbw = algbw passes the busbw check
    assert {r["collective"] for r in rows} == {"hypercube"} and len(rows) == 3 * 2 * 3


def test_synthetic_alltoallv_reads_under_its_binary_name_and_when_named():
    # size: the busiest rank's bytes (AlltoAllvComputeMaxCounts), no fixed ratio to its per-peer count
    rows = [(size, count, 50.0, round(size / 50.0 / 1e3, 2), round(size / 50.0 / 1e3 * 7 / 8, 2))
            for size, count in ((8400, 256), (1081344, 32768))]
    (run,) = parse_text(_synthetic("alltoallv_perf", 8, rows), "a2av.txt")
    assert (run.collective, run.collective_source, run.world_size) == ("alltoallv", "log", 8)
    assert {r["collective"] for r in comm_rows(run)} == {"alltoallv"}
    headless = "\n".join(_synthetic("alltoallv_perf", 8, rows).splitlines()[1:])  # no 'Collective test' line
    (named,) = parse_text(headless, "a2av.txt", collective="alltoallv")
    assert named.collective == "alltoallv"


# --- the nccl-tests engine: the binaries a build has, one line for each it lacks, bisection left to torch.

ROOT = Path(__file__).resolve().parent.parent


def _gpubench(*args, env=None):
    clean = {k: v for k, v in os.environ.items() if k not in ("NCCL_TESTS_DIR", "RCCL_TESTS_DIR")}
    return subprocess.run([sys.executable, "-m", "gpubench", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={**clean, **(env or {})})


def test_the_engine_runs_the_binaries_the_build_has_and_says_in_one_line_each_it_lacks(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "gather.log"
    log.write_text(_published(GATHER) + "\n")
    write_stand_in(bindir / "gather_perf", log, tmp_path / "argv")  # a build with gather_perf alone
    proc = _gpubench("run", "--suite", "comm", "--engine", "nccl-tests", "--nccl-tests-dir", bindir,
                     "--collectives", "gather,scatter,hypercube,bisection", "--min-bytes", "128M",
                     "--max-bytes", "256M", "--step-factor", "2", "--nproc", "2", "--out", tmp_path / "r",
                     "--cluster", "t")
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = [ln for ln in proc.stdout.splitlines() if "not run" in ln]
    assert said == [f"nccl-tests: bisection: nccl-tests has no bisection_perf (the torch engine alone measures it):"
                    " not run",
                    f"nccl-tests: scatter: the nccl-tests build at {bindir} has no scatter_perf: not run",
                    f"nccl-tests: hypercube: the nccl-tests build at {bindir} has no hypercube_perf: not run"]
    assert (tmp_path / "argv").read_text().splitlines() == [
        "-b 134217728 -e 268435456 -f 2 -d float -n 20 -w 5 -c 1 -t 2 -g 1"]
    run = next((tmp_path / "r" / "t").iterdir())
    df = results.load(run)
    assert set(df["collective"]) == {"gather"} and set(df["bytes"]) == {128 << 20, 256 << 20}
    assert set(df["root"]) == {0} and set(df["engine"]) == {"nccl-tests"}
    assert json.loads((run / "run.json").read_text())["engine"]["not_run"] == [ln[len("nccl-tests: "):] for ln in said]


def test_bisection_alone_is_refused_in_one_line_naming_the_torch_engine(tmp_path):
    proc = _gpubench("run", "--suite", "comm", "--engine", "nccl-tests", "--nccl-tests-dir", tmp_path,
                     "--collectives", "bisection", "--nproc", "2", "--out", tmp_path / "r", "--cluster", "t")
    assert proc.returncode == 2 and "--engine torch" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "r").exists()
