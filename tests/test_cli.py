"""The CLI end to end on the fake backend: output, exit codes, bad input, faults, Ctrl-C."""

import json
import os
import signal
import threading
import time

import pytest

from gpubench import declared, registry, results
from gpubench.results import rundir
from gpubench.cli import main
from gpubench.suite import TIME, Case, Check, Derived, Suite, Workload


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gpubench: error: ")
    return lines[0]


class Scripted(Suite):
    """Four cases whose behaviour a test scripts: ok, raise, wrong answer, Ctrl-C while preparing, or slow calls
    (each 0.3 s of wall time) with a Ctrl-C a second into the case."""

    name = "scripted"
    version = 3
    backends = frozenset({"fake"})
    metrics = (TIME,)
    params = ("i",)
    script: dict = {}
    sent = None  # when the slow case's Ctrl-C was sent

    def cases(self, ctx):
        return [Case.of(i=i) for i in range(4)]

    def prepare(self, case, backend):
        what = self.script.get(case["i"], "ok")
        if what == "raise":
            raise MemoryError("CUDA out of memory. Tried to allocate 8.00 GiB\nsecond line")
        if what == "sigint":
            os.kill(os.getpid(), signal.SIGINT)
        if what == "sigint2":
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
        run = lambda x: x  # noqa: E731
        if what == "slow":
            def run(x):
                time.sleep(0.3)
                return x

            def ctrl_c():
                Scripted.sent = time.monotonic()
                os.kill(os.getpid(), signal.SIGINT)

            threading.Timer(1.0, ctrl_c).start()
        ok = what != "wrong"
        return Workload(run=run, make_inputs=lambda: 1, bytes=100,
                        check=lambda x, out: Check(ok, 0.0 if ok else 0.5, 0.1))


@pytest.fixture
def scripted(monkeypatch):
    real = registry.all_suites

    def with_scripted():
        return {**real(), "scripted": Scripted}

    monkeypatch.setattr(registry, "all_suites", with_scripted)
    # The command line reads the suites' declarations before it imports them: this process's registry has one more.
    monkeypatch.setattr(declared, "suites", lambda: [declared.of(cls) for cls in with_scripted().values()])
    Scripted.script = {}
    Scripted.sent = None
    return Scripted


def only_run_dir(out, cluster="t"):
    runs = list((out / cluster).iterdir())
    assert len(runs) == 1
    return runs[0]


def test_list_shows_suites_backends_and_metrics(capsys):
    code, out, _ = run(capsys, "list")
    assert code == 0
    assert "elementwise" in out and "GB/s" in out


def test_info_json_on_fake(capsys):
    code, out, _ = run(capsys, "info", "--json", "--backend", "fake", "--cluster", "lab")
    assert code == 0
    info = json.loads(out)
    assert info["identity"]["gpu_model"] == "Fake GPU" and info["identity"]["cluster"] == "lab"
    assert len(info["fingerprint"]) == 16
    assert info["device"]["state"]["sm_clock_mhz"] == 1980.0


def test_run_writes_a_run_directory_that_loads(capsys, tmp_path):
    code, out, err = run(capsys, "run", "--suite", "elementwise", "--backend", "fake", "--quick",
                         "--out", str(tmp_path), "--cluster", "t", "--dtype", "fp32")
    assert code == 0, err
    rd = only_run_dir(tmp_path)
    assert f"run directory: {rd}" in out
    assert "[6/6] elementwise op=fill" in err  # progress lines in a log
    meta = json.loads((rd / "run.json").read_text())
    assert meta["status"] == "complete" and meta["schema_version"] == results.SCHEMA_VERSION
    assert meta["argv"][:3] == ["gpubench", "run", "--suite"]
    assert meta["fingerprint"]["identity"]["gpu_model"] == "Fake GPU"
    df = results.load(rd)
    assert set(df["op"]) == {"copy", "mul", "add", "triad", "dot", "fill"}
    assert set(df["metric"]) == {"bandwidth", "time", "throughput"}
    assert (df["status"] == "ok").all()
    assert (df["run_id"] == meta["run_id"]).all()


@pytest.mark.parametrize("argv,needle", [
    (["run", "--suite", "nosuch", "--backend", "fake"], "unknown suite 'nosuch': choose from"),
    (["run", "--suite", "elementwise", "--backend", "tpu"], "invalid choice: 'tpu'"),
    (["run", "--suite", "elementwise", "--backend", "fake", "--device", "7"], "device 7 does not exist"),
    (["run", "--suite", "elementwise", "--backend", "fake", "--sizes", "12Q"], "malformed size '12Q'"),
    (["run", "--suite", "elementwise", "--backend", "fake", "--dtype", "fp8"], "no dtype fp8"),
    (["run", "--suite", "elementwise", "--backend", "fake", "--filter", "("], "bad --filter"),
    (["run", "--suite", "elementwise", "--backend", "fake", "--filter", "op=nothing"], "no case matches"),
    (["run", "--suite", "elementwise", "--backend", "fake", "--cluster", "a/b"], "bad --cluster"),
    (["run", "--backend", "fake"], "the following arguments are required: --suite"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(capsys, tmp_path, argv, needle):
    out = tmp_path / "out"
    code, _, err = run(capsys, *argv, *(["--out", str(out)] if argv[0] == "run" else []))
    assert code == 2
    assert needle in one_line_error(err)
    assert not out.exists()


def test_a_run_refused_for_memory_is_one_line_and_leaves_no_folder(capsys, tmp_path, monkeypatch):
    # Every case is too large: the refusal comes once they were tried. Nothing is said of the host before it (a
    # busy one here), and no --out folder is left after it; one that was there stays (issue 50, items 3 and 6).
    monkeypatch.setenv("GPUBENCH_FAKE_HOST_BUSY", "0.9")
    argv = ["run", "--suite", "elementwise", "--backend", "fake", "--sizes", "4T", "--dtype", "fp32", "--out"]
    code, _, err = run(capsys, *argv, str(tmp_path / "new" / "results"))
    assert code == 2 and "nothing asked for fits here" in one_line_error(err)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "mine").mkdir()
    code, _, err = run(capsys, *argv, str(tmp_path / "mine"))
    assert code == 2 and "nothing asked for fits here" in one_line_error(err)
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]


def test_a_report_of_no_run_leaves_no_folder(capsys, tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(tmp_path)  # the default --out is ./gpubench-report
    for out in ([], ["--out", str(tmp_path / "page")]):
        code, _, err = run(capsys, "report", str(empty), *out)
        assert code == 2 and "is not a run directory" in one_line_error(err)
        assert [p.name for p in tmp_path.iterdir()] == ["empty"]


def test_unavailable_backend_says_why(capsys, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code, _, err = run(capsys, "run", "--suite", "elementwise", "--backend", "cuda", "--out", str(tmp_path / "o"))
    assert code == 2
    assert "backend 'cuda' is not available" in one_line_error(err)


def test_unwritable_output_directory(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, _, err = run(capsys, "run", "--suite", "elementwise", "--backend", "fake", "--out", str(blocker / "x"))
    assert code == 2
    assert "cannot write there (Not a directory)" in one_line_error(err)


def test_a_case_that_raises_becomes_an_error_row_and_the_run_goes_on(capsys, tmp_path, scripted):
    scripted.script = {1: "raise", 2: "wrong"}
    code, out, _ = run(capsys, "run", "--suite", "scripted", "--backend", "fake", "--out", str(tmp_path), "--cluster", "t")
    assert code == 1
    assert "2 case(s) failed" in out
    df = results.load(only_run_dir(tmp_path)).set_index("i")
    assert list(df["status"]) == ["ok", "error", "invalid", "ok"]
    assert df.loc[1, "message"] == "MemoryError: CUDA out of memory. Tried to allocate 8.00 GiB"
    assert df.loc[2, "message"] == "check failed: error 0.5 > tolerance 0.1"
    assert df.loc[2, "n"] == 0 and df.loc[2, "samples"] == []  # never timed
    assert df.loc[0, "n"] >= 5 and df.loc[0, "suite_version"] == 3


def test_ctrl_c_abandons_the_case_in_progress_and_keeps_those_before(capsys, tmp_path, scripted):
    scripted.script = {1: "sigint"}
    code, out, err = run(capsys, "run", "--suite", "scripted", "--backend", "fake", "--out", str(tmp_path), "--cluster", "t")
    assert code == 130
    rd = only_run_dir(tmp_path)
    meta = json.loads((rd / "run.json").read_text())
    assert meta["status"] == "interrupted" and meta["cases_done"] == 1  # the abandoned case was not done
    df = results.load(rd).set_index("i")
    assert list(df.index) == [0, 1] and df.loc[0, "status"] == "ok"
    assert df.loc[1, "status"] == "skipped" and df.loc[1, "message"] == rundir.ABANDONED and df.loc[1, "n"] == 0
    assert "stopping: the case in progress is abandoned" in err
    assert f"interrupted; scripted i=1 was abandoned; 1 case was saved in {rd}" in " ".join(out.split())


def test_the_command_ends_without_tearing_torch_down(tmp_path):
    # With torch loaded the interpreter's teardown took 2-14 s after a run's last line on a busy 2-core VM, most of
    # a Ctrl-C's wait (issue 50, item 8): the command's exit handlers run and its output is flushed, the teardown
    # is skipped, the status is main's.
    import subprocess
    import sys

    probe = (
        "import atexit, sys\n"
        "import torch\n"
        "class Late:\n"
        "    def __del__(self): print('torn down', flush=True)\n"
        "late = Late()  # a module global: released only when the interpreter is torn down\n"
        "atexit.register(lambda: print('exit handler ran'))\n"
        "sys.argv = ['gpubench', 'frobnicate']\n"
        "print('output', end='')  # not flushed yet\n"
        "from gpubench.cli import entry\n"
        "entry()\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "invalid choice: 'frobnicate'" in proc.stderr
    assert proc.stdout == "outputexit handler ran\n", proc.stdout


def test_ctrl_c_in_the_middle_of_a_long_case_acts_within_a_batch(capsys, tmp_path, scripted, monkeypatch):
    # Case 1's calls take 0.3 s each (10 ms on the fake clock: one call a batch); measured to the end it would
    # take ~10 s more. A Ctrl-C a second in leaves it at the next batch.
    monkeypatch.setenv("GPUBENCH_FAKE_CALL_S", "0.01")
    scripted.script = {1: "slow"}
    code, out, _ = run(capsys, "run", "--suite", "scripted", "--backend", "fake", "--out", str(tmp_path), "--cluster", "t")
    took = time.monotonic() - scripted.sent
    assert code == 130 and took < 2.0, took
    df = results.load(only_run_dir(tmp_path)).set_index("i")
    assert list(df.index) == [0, 1] and df.loc[0, "status"] == "ok" and df.loc[1, "message"] == rundir.ABANDONED
    assert "scripted i=1 was abandoned; 1 case was saved" in " ".join(out.split())


def test_ctrl_c_still_summarizes_the_cases_measured(capsys, tmp_path, scripted, monkeypatch):
    def summarize(self, rows):
        done = sorted({r["i"] for r in rows if r.get("stop") != "derived"})
        return [Derived(Case.of(i=-1), TIME, float(len(done)), f"cases {done}")]

    monkeypatch.setattr(Scripted, "summarize", summarize)
    scripted.script = {1: "sigint"}
    code, _, _ = run(capsys, "run", "--suite", "scripted", "--backend", "fake", "--out", str(tmp_path), "--cluster", "t")
    assert code == 130
    df = results.load(only_run_dir(tmp_path)).set_index("i")
    assert list(df.index) == [0, 1, -1]
    assert df.loc[-1, "value"] == 2 and df.loc[-1, "message"] == "cases [0, 1]; run interrupted: over the cases measured"


def test_an_interrupted_runs_derived_row_with_no_message_of_its_own_starts_with_the_interruption(
        capsys, tmp_path, scripted, monkeypatch):
    monkeypatch.setattr(Scripted, "summarize", lambda self, rows: [Derived(Case.of(i=-1), TIME, 1.0, "")])
    scripted.script = {1: "sigint"}
    code, _, _ = run(capsys, "run", "--suite", "scripted", "--backend", "fake", "--out", str(tmp_path), "--cluster", "t")
    assert code == 130
    df = results.load(only_run_dir(tmp_path)).set_index("i")
    assert df.loc[-1, "message"] == "run interrupted: over the cases measured"


def test_second_ctrl_c_stops_at_once_and_keeps_earlier_cases(capsys, tmp_path, scripted):
    scripted.script = {2: "sigint2"}
    code, out, _ = run(capsys, "run", "--suite", "scripted", "--backend", "fake", "--out", str(tmp_path), "--cluster", "t")
    assert code == 130
    rd = only_run_dir(tmp_path)
    assert json.loads((rd / "run.json").read_text())["status"] == "interrupted"
    assert list(results.load(rd)["i"]) == [0, 1]
    assert "interrupted; scripted i=2 was abandoned; 2 cases were saved" in " ".join(out.split())


def test_a_double_ctrl_c_in_the_first_case_says_none_was_saved(capsys, tmp_path, scripted):
    scripted.script = {0: "sigint2"}
    code, out, _ = run(capsys, "run", "--suite", "scripted", "--backend", "fake", "--out", str(tmp_path), "--cluster", "t")
    assert code == 130
    assert not list(only_run_dir(tmp_path).glob("*.parquet"))
    assert "interrupted; scripted i=0 was abandoned; no case was saved" in " ".join(out.split())


def test_suite_on_a_backend_it_does_not_support(capsys, tmp_path, scripted):
    code, _, err = run(capsys, "run", "--suite", "scripted", "--backend", "cpu", "--out", str(tmp_path / "o"))
    assert code == 2
    assert "does not run on backend 'cpu'" in one_line_error(err)


def test_run_json_records_the_checkout_commit_only_for_a_gpubench_checkout(tmp_path, monkeypatch):
    import subprocess

    from gpubench.results import rundir

    sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                         cwd=rundir.Path(rundir.__file__).parent).stdout.strip()
    if len(sha) == 40:  # running from a git checkout of gpubench
        assert rundir.git_sha() == sha
    fake_pkg = tmp_path / "site" / "gpubench" / "results"
    fake_pkg.mkdir(parents=True)
    monkeypatch.setattr(rundir, "__file__", str(fake_pkg / "rundir.py"))
    assert rundir.git_sha() is None  # no pyproject of gpubench above it


def test_no_telemetry_records_no_device_state(capsys, tmp_path):
    code, _, _ = run(capsys, "run", "--suite", "elementwise", "--backend", "fake", "--quick", "--dtype", "fp32",
                     "--filter", "op=copy", "--out", str(tmp_path), "--cluster", "t", "--no-telemetry")
    assert code == 0
    rd = only_run_dir(tmp_path)
    assert json.loads((rd / "run.json").read_text())["telemetry"] == "off"
    df = results.load(rd)
    assert df["sm_clock_mhz"].isna().all() and df["throttle"].isna().all()


def test_a_refused_out_folder_another_process_removed_meanwhile_is_no_traceback(tmp_path, monkeypatch):
    # The ranks of one step refuse the same input at once and each removes the --out folder it made: the one that
    # lists it after another removed it found nothing (a FileNotFoundError traceback in CI before).
    from gpubench import cli

    top = tmp_path / "out"
    (top / "fabric").mkdir(parents=True)

    def gone(self, pattern):
        raise FileNotFoundError(2, "No such file or directory", str(self))

    monkeypatch.setattr(type(top), "rglob", gone)
    cli._remove_empty(top)  # raises nothing
