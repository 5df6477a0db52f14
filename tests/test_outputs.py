"""Every failure to write what was asked for (--out) is one line and exit 2, before any verdict is shown:
a read-only file system, a folder where a file was meant, a disk that fills up (real tmpfs mounts where this
machine allows them)."""

import contextlib
import os
import subprocess
from pathlib import Path

import pytest
from test_compare_helpers import base_run, cli, copy_run, one_line_error, scaled, worse_by


@pytest.fixture
def base(tmp_path_factory):
    return base_run(tmp_path_factory)


@contextlib.contextmanager
def _tmpfs(path: Path, options: str):
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True).returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", str(path)], capture_output=True)


@pytest.fixture
def read_only(tmp_path):
    """A folder nothing can be written into: a read-only tmpfs where this process may mount one; otherwise a
    folder without write permission (not root), or /sys (root, which no permission stops)."""
    with _tmpfs(tmp_path / "ro", "ro,size=1m") as mounted:
        if mounted:
            yield tmp_path / "ro"
        elif os.geteuid() != 0:
            (tmp_path / "ro").chmod(0o555)
            yield tmp_path / "ro"
            (tmp_path / "ro").chmod(0o755)
        else:
            yield Path("/sys")


def _no_traceback(out: str, err: str) -> str:
    assert "Traceback" not in out + err
    return one_line_error(err)


def test_compare_that_cannot_write_its_out_file_is_exit_2_before_any_verdict(capsys, base, tmp_path, read_only):
    worse = copy_run(base, tmp_path, "20990102T000000Z-00000b", lambda df: scaled(df, worse_by(0.3)))
    code, out, err = cli(capsys, "compare", base, worse, "--out", read_only / "summary.md")
    assert code == 2 and out == ""  # not 1 (WORSE), and no table a CI log could read as a verdict
    assert "cannot write in" in _no_traceback(out, err)
    code, out, err = cli(capsys, "compare", base, worse, "--out", tmp_path)  # a folder
    assert code == 2 and out == "" and "is a folder: give a file name in it" in _no_traceback(out, err)
    code, out, err = cli(capsys, "compare", base, worse, "--out", tmp_path / "no" / "such.json")
    assert code == 2 and "does not exist" in _no_traceback(out, err)


def test_export_report_and_calibrate_that_cannot_write_are_exit_2(capsys, base, tmp_path, read_only):
    for argv, needle in (
        (["export", base, "--out", read_only / "b.json"], "cannot write in"),
        (["export", base, "--out", tmp_path], "is a folder"),
        (["report", base, "--out", read_only / "page"], "cannot write there"),
        (["report", base, "--out", read_only], "cannot write there"),
        (["calibrate", base, base, "--out", read_only / "t.toml"], "cannot write in"),
    ):
        code, out, err = cli(capsys, *argv)
        assert code == 2, (argv, err)
        assert needle in _no_traceback(out, err), argv


def test_a_disk_that_fills_up_while_the_report_is_written_is_exit_2(capsys, base, tmp_path):
    with _tmpfs(tmp_path / "small", "size=48k") as mounted:
        if not mounted:
            pytest.skip("this machine does not let the tests mount a tmpfs")
        code, out, err = cli(capsys, "report", base, "--out", tmp_path / "small" / "page")
        assert code == 2
        assert "cannot write the report there (No space left on device)" in _no_traceback(out, err)


def test_a_run_of_nothing_that_fits_is_one_line_and_exit_2_writing_nothing(capsys, tmp_path):
    code, out, err = cli(capsys, "run", "--suite", "elementwise", "--backend", "fake", "--sizes", "1T", "--out",
                         tmp_path / "r", "--cluster", "c")
    assert code == 2 and out == ""
    line = _no_traceback(out, err)
    assert "nothing asked for fits here: each of the 24 case(s) was too large (e.g. needs " in line
    assert line.endswith("choose smaller --sizes")
    assert not (tmp_path / "r" / "c").exists()
    # a run whose cases skip for another reason (no GPU for copies) says why and exits 0, as before
    code, _, _ = cli(capsys, "run", "--suite", "copy", "--backend", "cpu", "--quick", "--out", tmp_path / "r",
                     "--cluster", "c")
    assert code == 0 and len(list((tmp_path / "r" / "c").iterdir())) == 1


def test_a_run_json_cut_short_is_named_with_what_to_do(capsys, base, tmp_path):
    run = copy_run(base, tmp_path, "20990102T000000Z-00000b")
    text = (run / "run.json").read_text()
    (run / "run.json").write_text(text[: len(text) // 2])
    for argv in (["compare", base, run], ["report", run, "--out", tmp_path / "page"], ["export", run, "--out",
                                                                                        tmp_path / "x.json"]):
        code, out, err = cli(capsys, *argv)
        line = _no_traceback(out, err)
        assert code == 2 and f"{run / 'run.json'} is not whole JSON" in line, argv
        assert "cut short or damaged" in line and "move its run directory out of the way" in line
    # In a directory of runs alone, it is named too, and the fix said (issue 50, item 4).
    alone = tmp_path / "alone"
    alone.mkdir()
    run.rename(alone / run.name)
    for argv in (["compare", base, alone], ["compare", alone, base], ["accept", alone, "--reason", "x"]):
        code, out, err = cli(capsys, *argv)
        line = _no_traceback(out, err)
        assert code == 2 and line.startswith(f"gpubench: error: {alone} holds no complete run directory: "), argv
        assert f"{alone / run.name / 'run.json'} is not whole JSON" in line and "move its run directory" in line
