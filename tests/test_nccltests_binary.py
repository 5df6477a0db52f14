"""Finding, commanding and running nccl-tests binaries, with fake binaries: small Python scripts that print a
fixture, and sleep or hang where a test needs them to."""

import os
import stat
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gpubench.errors import UsageError
from gpubench.nccltests import parse_text
from gpubench.suites.comm import binaries
from gpubench.suites.comm.binaries import (BinaryStalled, BinaryTimeout, build_command, find_binary, json_written_to,
                                       run_binary, supports_json)

FIX = Path(__file__).parent / "fixtures" / "nccl-tests"
NCCL_HELP = ('USAGE: all_reduce_perf \n\t[-t,--nthreads <num threads>] \n\t[-S,--report_timestamps <0/1>] \n\t'
             '[-J,--output_file <file> write output to filepath, if accessible.] \n\t[-h,--help]\n')
RCCL_HELP = ('USAGE: all_reduce_perf \n\t[-t,--nthreads <num threads>] \n\t[-x,--output_file <output file name>] \n\t'
             '[-Z,--output_format <output format <csv|json>] \n\t[-h,--help]\n')


def fake(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def printer(path: Path, fixture: str = "nt-2.19.6-all_reduce-h200x2.txt", help_text: str = NCCL_HELP) -> Path:
    return fake(path, f"""
        import sys
        if "-h" in sys.argv:
            sys.stdout.write({help_text!r})
            sys.exit(0)
        sys.stdout.write(open({str(FIX / fixture)!r}).read())
        sys.stderr.write("argv: " + " ".join(sys.argv[1:]) + "\\n")
        """)


def gone(pid: int, within_s: float = 5.0) -> bool:
    """True once ``pid`` no longer runs (gone, or a zombie waiting for a reaper)."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


# -- find_binary -------------------------------------------------------------------------------------------------
def test_find_binary_looks_in_the_given_dir_its_build_dir_the_env_then_path(tmp_path, monkeypatch):
    for var in binaries.ENV_DIRS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    on_path = printer(tmp_path / "bin" / "all_reduce_perf")
    assert find_binary("all_reduce") == on_path
    env_build = printer(tmp_path / "env" / "build" / "all_reduce_perf")
    monkeypatch.setenv("RCCL_TESTS_DIR", str(tmp_path / "env"))
    assert find_binary("all_reduce") == env_build
    given = printer(tmp_path / "given" / "build" / "all_reduce_perf_mpi")
    assert find_binary("all_reduce", [tmp_path / "given"]) == given
    direct = printer(tmp_path / "given" / "all_reduce_perf")
    assert find_binary("all_reduce", [tmp_path / "given"]) == direct


def test_missing_binary_names_every_place_and_how_to_fix_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("NCCL_TESTS_DIR", str(tmp_path / "nt"))
    monkeypatch.delenv("RCCL_TESTS_DIR", raising=False)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "all_gather_perf").write_text("not executable")
    with pytest.raises(UsageError) as e:
        find_binary("all_gather", [tmp_path / "d"])
    msg = str(e.value)
    for place in (str(tmp_path / "d"), str(tmp_path / "d" / "build"), str(tmp_path / "nt"),
                  str(tmp_path / "nt" / "build"), "$RCCL_TESTS_DIR (unset)", "PATH", "--nccl-tests-dir DIR",
                  "NCCL_TESTS_DIR"):
        assert place in msg


# -- JSON support and the command line -----------------------------------------------------------------------------
def test_json_support_is_read_from_the_help_text(tmp_path):
    assert supports_json(printer(tmp_path / "nccl" / "all_reduce_perf")) is True
    # rccl-tests has --output_file too, as -x with its own report format: that is not -J.
    assert supports_json(printer(tmp_path / "rccl" / "all_reduce_perf", help_text=RCCL_HELP)) is False
    hang = fake(tmp_path / "hang" / "all_reduce_perf", "import time\ntime.sleep(30)\n")
    start = time.monotonic()
    assert supports_json(hang, timeout_s=0.5) is False and time.monotonic() - start < 5


def test_json_support_asks_the_binary_once(tmp_path):
    count = tmp_path / "count"
    exe = fake(tmp_path / "all_reduce_perf", f"""
        import sys
        with open({str(count)!r}, "a") as f:
            f.write("x")
        sys.stdout.write({NCCL_HELP!r})
        """)
    assert supports_json(exe) and supports_json(exe) and count.read_text() == "x"


def test_build_command(tmp_path):
    exe = printer(tmp_path / "all_reduce_perf")
    argv = build_command(exe, min_bytes=8, max_bytes=1 << 30, step_factor=2, dtype="bfloat16", op="sum", iters=20,
                         warmup=5, check=True, graph=True, ngpus=8, json_path=tmp_path / "o.json",
                         launcher_prefix=("mpirun", "-np", "2"), register=True)
    assert argv == ["mpirun", "-np", "2", str(exe), "-b", "8", "-e", str(1 << 30), "-f", "2", "-d", "bfloat16",
                    "-o", "sum", "-n", "20", "-w", "5", "-c", "1", "-g", "8", "-G", "1", "-R", "1",
                    "-J", str(tmp_path / "o.json")]
    plain = build_command(exe, min_bytes=1024, max_bytes=1024, step_factor=2, dtype="float32", op="none", iters=1,
                          warmup=0, check=False)
    assert plain == [str(exe), "-b", "1024", "-e", "1024", "-f", "2", "-d", "float", "-n", "1", "-w", "0", "-c", "0",
                     "-g", "1"]
    threads = build_command(exe, min_bytes=8, max_bytes=8, step_factor=2, dtype="float", op="sum", iters=20,
                            warmup=5, graph=10, nthreads=4)
    assert threads[-6:] == ["-t", "4", "-g", "1", "-G", "10"]
    rccl = printer(tmp_path / "r" / "all_reduce_perf", help_text=RCCL_HELP)
    assert "-J" not in build_command(rccl, min_bytes=8, max_bytes=8, step_factor=2, dtype="float", op="sum",
                                     iters=1, warmup=0, json_path=tmp_path / "o.json")


@pytest.mark.parametrize("kw,why", [
    ({"min_bytes": 0}, "sizes must satisfy"), ({"max_bytes": 4}, "sizes must satisfy"),
    ({"step_factor": 1}, "step factor 1"), ({"dtype": "complex64"}, "dtype 'complex64'"), ({"iters": 0}, "iters"),
])
def test_build_command_refuses_bad_input(tmp_path, kw, why):
    args = dict(min_bytes=8, max_bytes=8, step_factor=2, dtype="float32", op="sum", iters=1, warmup=0) | kw
    with pytest.raises(UsageError, match=why):
        build_command(tmp_path / "x", **args)


def test_json_path_comes_from_the_writing_line():
    stdout = (FIX / "nt-2.19.6-all_reduce-h200x2.txt").read_text()
    assert json_written_to(stdout) == "out/nt_all_reduce.json"
    assert json_written_to("# nThread 1\n") is None


# -- run_binary ---------------------------------------------------------------------------------------------------
def test_run_binary_returns_what_the_binary_printed(tmp_path):
    exe = printer(tmp_path / "all_reduce_perf")
    out, err, code, elapsed = run_binary([str(exe), "-b", "8"], timeout_s=30)
    assert code == 0 and out == (FIX / "nt-2.19.6-all_reduce-h200x2.txt").read_text()
    assert err == "argv: -b 8\n" and 0 < elapsed < 30
    assert len(parse_text(out, "stdout")[0].rows) == 14


def test_run_binary_passes_the_exit_code_and_environment(tmp_path):
    exe = fake(tmp_path / "x", "import os, sys\nprint(os.environ.get('NCCL_ALGO'))\nsys.exit(7)\n")
    out, _, code, _ = run_binary([str(exe)], timeout_s=30, env={"NCCL_ALGO": "Ring", "PATH": os.environ["PATH"]})
    assert (out, code) == ("Ring\n", 7)


def test_timeout_ends_the_whole_process_group(tmp_path):
    pidfile = tmp_path / "child.pid"
    exe = fake(tmp_path / "x", f"""
        import subprocess, sys, time
        child = subprocess.Popen(["sleep", "60"])
        open({str(pidfile)!r}, "w").write(str(child.pid))
        while True:
            print("# still going", flush=True)
            time.sleep(0.1)
        """)
    start = time.monotonic()
    with pytest.raises(BinaryTimeout, match=r"ran past its 1 s limit") as e:
        run_binary([str(exe)], timeout_s=1.0, stall_s=30)
    assert time.monotonic() - start < 10
    assert "# still going" in e.value.stdout
    assert gone(int(pidfile.read_text()))  # the grandchild did not outlive it


def test_a_binary_that_stops_printing_is_ended_and_named(tmp_path):
    exe = fake(tmp_path / "all_reduce_perf", """
        import time
        print("# nThread 1 nGpus 2", flush=True)
        print("#  Rank  0 Group  0 Pid 1 on vm device 0 [0000:00:06] NVIDIA H200", flush=True)
        time.sleep(60)
        """)
    start = time.monotonic()
    with pytest.raises(BinaryStalled) as e:
        run_binary([str(exe)], timeout_s=60, stall_s=1.0)
    msg = str(e.value)
    assert "all_reduce_perf stalled: no output for 1 s after the line" in msg and "Rank  0 Group" in msg
    assert time.monotonic() - start < 10 and e.value.stdout.startswith("# nThread 1")


def test_steady_output_is_not_a_stall(tmp_path):
    exe = fake(tmp_path / "x", """
        import time
        for i in range(8):
            print(i, flush=True)
            time.sleep(0.25)
        """)
    out, _, code, elapsed = run_binary([str(exe)], timeout_s=30, stall_s=1.0)
    assert code == 0 and out.split() == [str(i) for i in range(8)] and elapsed >= 1.5


def test_leftovers_of_a_finished_binary_are_ended(tmp_path):
    # The binary exits but leaves a child holding its stdout: run_binary must neither hang nor leave it running.
    pidfile = tmp_path / "child.pid"
    exe = fake(tmp_path / "x", f"""
        import subprocess
        child = subprocess.Popen(["sleep", "60"])
        open({str(pidfile)!r}, "w").write(str(child.pid))
        print("done", flush=True)
        """)
    start = time.monotonic()
    out, _, code, _ = run_binary([str(exe)], timeout_s=30)
    assert (out, code) == ("done\n", 0) and time.monotonic() - start < 10
    assert gone(int(pidfile.read_text()))


def test_a_binary_that_cannot_start_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="cannot run"):
        run_binary([str(tmp_path / "missing")], timeout_s=5)


def test_a_sweep_across_16_mib_runs_as_two_binary_runs():
    from gpubench.suites.comm.nccl_tests_engine import SPLIT_BYTES, segments

    m = 1 << 20
    assert SPLIT_BYTES == 16 * m
    assert segments(m, 4096 * m, 2) == [(m, 8 * m), (16 * m, 4096 * m)]  # the default sweep, every size
    assert segments(m, 4096 * m, 4) == [(m, 4 * m), (16 * m, 4096 * m)]
    assert segments(3 * m, 64 * m, 4) == [(3 * m, 12 * m), (48 * m, 64 * m)]  # sizes 3, 12 | 48
    # a sweep on one side of the split, or of one size, runs whole
    for whole in ((m, 8 * m, 2), (16 * m, 4096 * m, 2), (m, m, 2), (m, 12 * m, 4)):
        assert segments(*whole) == [whole[:2]]
