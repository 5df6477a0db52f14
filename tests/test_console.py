"""What a newcomer reads: numbers without exponents, units in every header, one dtype vocabulary, constant
columns above the table, identical skip reasons on one line, `info` and `list` readable when piped."""

import re

import pandas as pd
from rich.console import Console

from gpubench.cli import main
from gpubench.console import fmt_value, summary_tables
from gpubench.registry import all_suites
from gpubench.units import format_bytes


def test_numbers_print_without_exponents():
    assert fmt_value(12439.2) == "12,439" and fmt_value(123456.7) == "123,457"
    assert fmt_value(3.14159) == "3.142" and fmt_value(0.5) == "0.5" and fmt_value(0) == "0"
    assert fmt_value(1.234e-5) == "0.00001234" and fmt_value(None) == "—"
    assert all("e" not in fmt_value(10.0**k * 1.2345) for k in range(-9, 12))


def test_byte_counts_print_without_exponents():
    # An absurd --sizes states its need in plain digits (it once read "needs 2.265e+12 TiB").
    assert format_bytes(1536) == "1.5 KiB" and format_bytes(300 << 30) == "300 GiB" and format_bytes(5) == "5 B"
    assert format_bytes(3 << 50) == "3 PiB" and format_bytes(20_000 << 60) == "20,000 EiB"
    assert all("e+" not in format_bytes(1.2345 * 10.0**k) for k in range(0, 40))


def _rows(suite, dtype, cases, unit="us", status="ok", message=""):
    return [{"suite": suite, "suite_version": 1, "case": f"op={op},dtype={dtype},bytes={b}", "op": op, "dtype": dtype,
             "bytes": b, "metric": "time", "unit": unit, "value": 12439.2 if status == "ok" else float("nan"),
             "cv": 0.01, "n": 10, "status": status, "message": message, "device_index": 0, "host": "h",
             "sm_clock_mhz": None, "noisy": False, "host_bound": None} for op, b in cases]


def _text(df):
    console = Console(width=200, record=True, file=open("/dev/null", "w"))
    for t in summary_tables(df, {"s": ("op", "dtype", "bytes")}):
        console.print(t)
    return console.export_text()


def test_summary_header_units_constants_and_collapsed_skips():
    df = pd.DataFrame(_rows("s", "float32", [("add", 1024), ("mul", 1024)])
                      + _rows("s", "float32", [(f"x{i}", 1024) for i in range(37)], status="skipped",
                              message="needs a GPU")
                      + _rows("s", "float32", [("lone", 1024)], status="skipped", message="only this one"))
    text = _text(df)
    lines = text.splitlines()
    assert lines[0].strip() == "s (v1)"
    assert lines[1].strip() == "dtype=fp32, bytes=1 KiB"  # constant over the table: above it, in one vocabulary
    header = next(line for line in lines if "op" in line and "status" in line)
    assert "time [µs]" in header and "cv [%]" in header and "dtype" not in header and "MHz" not in header
    assert "12,439" in text and "e+04" not in text
    assert "37 cases skipped: needs a GPU" in text and text.count("needs a GPU") == 1
    assert "skipped: only this one" in text  # a reason of its own keeps its row


def test_a_table_of_only_shared_skips_is_their_reasons():
    df = pd.DataFrame(_rows("s", "fp32", [(f"x{i}", 1 << i) for i in range(5)], status="skipped",
                            message="needs a GPU"))
    text = _text(df)
    assert "5 cases skipped: needs a GPU" in text and "x0" not in text


def test_info_prints_human_units_and_no_none(capsys):
    assert main(["info", "--backend", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "None" not in out and ("MiB" in out or "KiB" in out)
    assert "GiB" in out  # memory_bytes


def test_list_piped_is_not_cut(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name, cls in all_suites().items():
        assert cls.description in out, name
    assert "time [µs, ↓]" in out


def test_backend_auto_names_what_it_chose(capsys, tmp_path):
    code = main(["run", "--suite", "launch", "--backend", "auto", "--quick", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 0
    assert err.splitlines()[0].startswith("backend: cpu, device 0 (") and err.splitlines()[0].endswith("(--backend auto)")


def test_a_suite_naming_block_columns_gets_one_table_per_block():
    rows = _rows("s", "float32", [("add", 1024), ("add", 2048)]) + _rows("s", "float32", [("mul", 1024), ("mul", 2048)])
    df = pd.DataFrame(rows)
    console = Console(width=200, record=True, file=open("/dev/null", "w"))
    tables = summary_tables(df, {"s": ("op", "dtype", "bytes")}, None, {"s": ("op",)})
    assert len(tables) == 2
    for t in tables:
        console.print(t)
    text = console.export_text()
    assert "op=add" in text and "op=mul" in text  # each block's constant op sits in its own header line
    assert len(summary_tables(df, {"s": ("op", "dtype", "bytes")})) == 1


def test_a_pipe_with_columns_set_gets_tables_that_wide(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80, out
    for name in all_suites():
        assert name in out


def _words(text):
    """The words of a terminal's text: whitespace and the tables' rules part them."""
    return set(re.split(r"[\s│┃]+", text)) - {""}


def test_list_at_80_columns_breaks_no_word(monkeypatch, capsys):
    # At 80 columns five narrow columns folded words: "torch.distribu|ted", "copy/mul/add/t|riad".
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80, out
    for name, cls in all_suites().items():
        broken = sorted(set(cls.description.split()) - _words(out))
        assert not broken, (name, broken, out)
        assert all(m.name in _words(out) or f"{m.name}," in _words(out) for m in cls.metrics), (name, out)


def test_a_runs_closing_lines_at_80_columns_break_no_word(monkeypatch, capsys, tmp_path):
    # A closing line printed unfolded was cut by the terminal at its edge ("... compare does not bl|ame"), a path
    # longer than the width folded by rich; now they fold between words, a path whole on a line of its own.
    import os

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("GPUBENCH_FAKE_OTHER_PIDS", str(os.getppid()))
    monkeypatch.setenv("GPUBENCH_FAKE_HOST_BUSY", "0.9")
    out_root = tmp_path / ("a-results-folder-whose-path-is-longer-than-a-terminal-" + "x" * 40)
    assert main(["run", "--suite", "copy", "--backend", "fake", "--quick", "--sizes", "64K", "--processes", "1",
                 "--filter", "direction=h2d,memory=pinned", "--out", str(out_root), "--cluster", "t"]) == 0
    lines = capsys.readouterr().out.splitlines()
    closing = lines[max(i for i, line in enumerate(lines) if line.startswith("└")) + 1:]
    run_dir = str(next((out_root / "t").iterdir()))
    assert len(run_dir) > 80 and run_dir in closing, closing  # whole, on its own line
    assert all(len(line) <= 80 for line in closing if line != run_dir), closing
    text = " ".join(closing)
    for said in ("compare does not blame the code for them", "compare does not judge the figures the host sets on a "
                 "busy run", f"run directory: {run_dir}", "the cases took"):
        assert said in text, closing


def test_the_cost_line_counts_each_case_once_and_devices_at_once_as_the_slowest():
    import pandas as pd

    from gpubench.console import cost_line

    def rows(suite, case, device, seconds, metrics=("time", "bandwidth")):
        return [{"suite": suite, "case": case, "host": "n1", "device_index": device, "metric": m, "case_s": seconds}
                for m in metrics]

    df = pd.DataFrame([
        *rows("copy", "a", 0, 2.0), *rows("copy", "b", 0, 3.0),  # two metrics a case: its time counts once
        *rows("copy", "a", 1, 4.0), *rows("copy", "b", 1, 4.5),  # a second device measuring at once: the slowest
        *rows("launch", "x", 0, 1.25), *rows("launch", "fit", 0, None),  # a derived figure costs nothing of its own
    ])
    assert cost_line(df) == "the cases took 9.8 s: copy 8.5 s, launch 1.2 s"
    assert cost_line(df.drop(columns="case_s")) is None  # a table from before v6


def test_a_progress_line_in_a_log_is_one_write_with_its_newline(monkeypatch):
    # A rank's closing "gpubench: error:" line is written from its signal thread; between a progress line and its
    # newline written apart it landed mid-line (mpirun in CI, 2026-11-27: "... ±23%gpubench: error: rank 0 ...").
    import sys

    from gpubench.console import RunProgress

    class Log:
        def __init__(self):
            self.writes = []

        def write(self, text):
            self.writes.append(text)
            return len(text)

        def flush(self):
            pass

        def isatty(self):
            return False

    log = Log()
    monkeypatch.setattr(sys, "stderr", log)
    progress = RunProgress(Console(file=log, force_terminal=False))
    progress.start(2)
    progress._say("[1/2] copy direction=h2d: 48.41 GB/s ±1.4%")
    assert log.writes == ["[1/2] copy direction=h2d: 48.41 GB/s ±1.4%\n"]
