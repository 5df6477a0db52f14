"""The gate's memory over a directory of nights (fake-backend runs, copied and altered): a regression stays red
until it recovers or is accepted, and only clean, accepted nights are baseline evidence."""

import json

import pytest
from test_compare_helpers import base_run, cli, copy_run, scaled, worse_by

from gpubench import results
from gpubench.compare import gate_memory as memory
from gpubench.compare.verdict import SAME, UNKNOWN, WORSE

QUIET = (1.0, 1.002, 0.998, 1.001, 0.999)  # five quiet nights: a GPU-timed figure moving 0.4 %


@pytest.fixture
def base(tmp_path_factory):
    return base_run(tmp_path_factory)


def run_id(day: int) -> str:
    return f"2099{day // 28 + 1:02d}{day % 28 + 1:02d}T000000Z-{day:06x}"


def night(base, lab, day, level=1.0, slow=0.0, meta=None):
    """Night ``day``: every figure at ``level`` (a multiple of its samples) and ``slow`` worse."""
    return copy_run(base, lab, run_id(day), lambda df: scaled(scaled(df, lambda r: level), worse_by(slow)), meta)


def judge(capsys, lab, run, *more):
    """``gpubench compare LAB RUN``: the run against the nights before it, as a plain compare does."""
    code, out, err = cli(capsys, "compare", lab, run, "--format", "json", *more)
    assert code in (0, 1), err
    return code, json.loads(out)


def verdicts(doc):
    return {r["verdict"] for r in doc["rows"] if r["status"] == "compared"}


def quiet_nights(capsys, base, lab, first=0):
    """Five quiet nights, each judged against those before it (the first starts the directory)."""
    for i, level in enumerate(QUIET):
        run = night(base, lab, first + i, level)
        if i:
            code, doc = judge(capsys, lab, run)
            assert code == 0 and WORSE not in verdicts(doc)
    return first + len(QUIET)


def test_a_regression_stays_worse_until_it_recovers(capsys, base, tmp_path):
    lab = tmp_path / "results" / "lab"
    day = quiet_nights(capsys, base, lab)
    first_bad = run_id(day)
    for k in range(1, 4):  # three nights 10 % slower: each WORSE, each naming the first
        run = night(base, lab, day, slow=0.10)
        day += 1
        code, doc = judge(capsys, lab, run)
        assert code == 1 and verdicts(doc) == {WORSE}
        rows = [r for r in doc["rows"] if r["status"] == "compared"]
        assert {(r["since"], r["nights"]) for r in rows} == {(first_bad, k)}
        assert all(r["note"].startswith(f"WORSE since {first_bad} ({k} night{'s' if k > 1 else ''})") for r in rows)
        # the window is the quiet nights: the slow ones before tonight are left out as regressed
        assert doc["baseline"]["run_ids"] == [run_id(i) for i in range(len(QUIET))]
        assert doc["window"].startswith("window: 5 run(s)")
        assert (f"left out: {k - 1} regressed" in doc["window"]) == (k > 1)
        (reg,) = doc["regressions"]
        assert (reg["since"], reg["nights"], reg["last_good"]) == (first_bad, k, run_id(len(QUIET) - 1))
        assert memory.recorded(run)["worse"][0]["since"] == first_bad  # the run keeps its verdict
    # back at the old level: SAME, and the notes say it recovered
    run = night(base, lab, day)
    code, doc = judge(capsys, lab, run)
    assert code == 0 and verdicts(doc) == {SAME}
    rows = [r for r in doc["rows"] if r["status"] == "compared"]
    assert all(r["note"].startswith(f"recovered: WORSE since {first_bad} for 3 nights") for r in rows)
    assert memory.recorded(run)["worse"] == []
    # and the night after that is an ordinary night: the regression is over
    code, doc = judge(capsys, lab, night(base, lab, day + 1))
    assert code == 0 and not any("recovered" in r["note"] for r in doc["rows"])


def test_an_accepted_slowdown_is_the_baseline_from_its_first_night(capsys, base, tmp_path):
    lab = tmp_path / "results" / "lab"
    day = quiet_nights(capsys, base, lab)
    first_bad = run_id(day)
    for _ in range(3):
        code, _ = judge(capsys, lab, night(base, lab, day, slow=0.10))
        day += 1
        assert code == 1
    # nothing to accept that is not WORSE; a reason is required
    code, _, err = cli(capsys, "accept", lab, "--filter", "no-such-figure", "--reason", "x")
    assert code == 2 and "nothing to accept" in err
    code, _, err = cli(capsys, "accept", lab, "--reason", " ")
    assert code == 2 and "--reason is empty" in err
    code, out, _ = cli(capsys, "accept", lab, "--reason", "driver 580 trades bandwidth for power")
    assert code == 0 and f"from {first_bad} on" in out
    (entry,) = json.loads((lab / run_id(day - 1) / memory.ACCEPTED).read_text())["acceptances"]
    assert entry["reason"] == "driver 580 trades bandwidth for power" and "@" in entry["by"] and entry["at"]
    for _ in range(2):  # the slowed level is now normal: SAME, judged against the accepted nights at once
        code, doc = judge(capsys, lab, night(base, lab, day, slow=0.10))
        day += 1
        assert code == 0 and verdicts(doc) == {SAME}
        assert doc["baseline"]["run_ids"][0] == first_bad
    # and a further slowdown from the new level is WORSE again, since tonight
    code, doc = judge(capsys, lab, night(base, lab, day, slow=0.21))
    assert code == 1 and verdicts(doc) == {WORSE}
    assert {r["since"] for r in doc["rows"] if r["status"] == "compared"} == {run_id(day)}


def test_accepting_only_some_figures_keeps_the_others_red(capsys, base, tmp_path):
    lab = tmp_path / "results" / "lab"
    day = quiet_nights(capsys, base, lab)
    for _ in range(2):
        code, _ = judge(capsys, lab, night(base, lab, day, slow=0.10))
        day += 1
        assert code == 1
    code, out, _ = cli(capsys, "accept", lab, "--filter", "op=copy", "--reason", "copy kernel rewritten")
    assert code == 0 and "accepted 2 WORSE figure(s)" in out  # op=copy's bandwidth and time
    code, doc = judge(capsys, lab, night(base, lab, day, slow=0.10))
    assert code == 1
    by_case = {(r["case"], r["verdict"]) for r in doc["rows"] if r["status"] == "compared"}
    assert {v for c, v in by_case if "op=copy" in c} == {SAME}
    assert {v for c, v in by_case if "op=triad" in c} == {WORSE}


def test_shared_and_failed_nights_never_enter_a_later_window(capsys, base, tmp_path):
    # (a busy host's night is left out for the figures the host sets only: tests/test_compare_machine_state.py)
    lab = tmp_path / "results" / "lab"
    day = quiet_nights(capsys, base, lab)
    odd = {
        "shared GPU": lambda m: m.update(contention={"contended": "pid 4842 (python3)", "cases": {}}),
        "failed": lambda m: m.update(status="failed"),
        "interrupted": lambda m: m.update(status="interrupted"),
    }
    for why, meta in odd.items():  # each of them much slower: evidence of nothing
        night(base, lab, day, slow=0.5, meta=meta)
        day += 1
    code, doc = judge(capsys, lab, night(base, lab, day, slow=0.10))
    assert code == 1 and verdicts(doc) == {WORSE}
    assert doc["baseline"]["run_ids"] == [run_id(i) for i in range(len(QUIET))]
    assert doc["window"].endswith("left out: 1 shared GPU, 1 failed, 1 interrupted")
    assert not any("baseline run" in line for line in doc["contention"])  # nobody shared the baseline's GPU


def test_a_night_that_shared_its_gpu_is_named_and_not_blamed(capsys, base, tmp_path):
    lab = tmp_path / "results" / "lab"
    day = quiet_nights(capsys, base, lab)
    cases = sorted(set(results.load(base)["case"]))  # every case of the night measured beside another process
    shared = night(base, lab, day, slow=0.5, meta=lambda m: m.update(
        contention={"contended": "pid 4842 (python3)", "cases": {"elementwise": cases}}))
    code, doc = judge(capsys, lab, shared)
    assert code == 0 and verdicts(doc) == {UNKNOWN}
    assert doc["contention"] == ["GPU shared during the current run: pid 4842 (python3)"]
    assert memory.recorded(shared)["worse"] == []  # not a regression either
    code, doc = judge(capsys, lab, night(base, lab, day + 1))
    assert code == 0 and doc["contention"] == [] and shared.name not in doc["baseline"]["run_ids"]


def test_a_busy_side_s_host_set_change_is_unknown_naming_the_load(capsys, base, tmp_path):
    def host_timed(df):
        df = df.copy()
        df["timing_method"] = "host clock"
        return df

    quiet = tmp_path / "quiet"
    quiet.mkdir()
    for i, level in enumerate(QUIET):  # a window that judges a host-timed figure
        copy_run(base, quiet, run_id(i), lambda df, k=level: host_timed(scaled(df, lambda r: k)))
    busy = {"contended": "", "host": {"loaded": True, "others_share": 0.85, "cpus": 2,
                                      "heaviest": "pid 99 (stress) 170% CPU"}}
    b = copy_run(base, tmp_path, run_id(10), lambda df: host_timed(scaled(df, worse_by(0.3))))
    code, out, _ = cli(capsys, "compare", quiet, b, "--format", "json")
    assert code == 1 and verdicts(json.loads(out)) == {WORSE}  # on an idle host: WORSE
    b = copy_run(base, tmp_path, run_id(11), lambda df: host_timed(scaled(df, worse_by(0.3))),
                 meta=lambda m: m.update(contention=busy))
    code, out, _ = cli(capsys, "compare", quiet, b, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and verdicts(doc) == {UNKNOWN}
    assert all("the current run's host was busy (other processes used 85% of 2 CPUs (heaviest: pid 99 (stress) "
               "170% CPU)): host-timed, not judged" in r["note"] for r in doc["rows"] if r["status"] == "compared")
    assert doc["contention"] == ["host busy during the current run: other processes used 85% of 2 CPUs (heaviest: "
                                 "pid 99 (stress) 170% CPU)"]
    # the CPU backend's figures are the host's too; a GPU-timed figure is judged whatever the host did
    cpu = copy_run(base, tmp_path, run_id(2), lambda df: scaled(df.assign(backend="cpu"), worse_by(0.3)),
                   meta=lambda m: m.update(contention=busy))
    gpu = copy_run(base, tmp_path, run_id(3), lambda df: scaled(df, worse_by(0.3)),
                   meta=lambda m: m.update(contention=busy))
    base_cpu = copy_run(base, tmp_path, run_id(4), lambda df: df.assign(backend="cpu"))
    code, out, _ = cli(capsys, "compare", base_cpu, cpu, "--format", "json")
    assert code == 0 and all("measured on the CPU, not judged" in r["note"] for r in json.loads(out)["rows"])
    code, out, _ = cli(capsys, "compare", base, gpu, "--format", "json")
    assert code == 1 and verdicts(json.loads(out)) == {WORSE}


def test_a_blip_the_rerun_does_not_confirm_leaves_no_trace(tmp_path):
    from test_compare_nightly import nightly

    for _ in range(4):  # the window fills (the first night starts it)
        assert nightly(tmp_path).returncode == 0
    marker = tmp_path / "slow-once"
    marker.write_text("")
    once = nightly(tmp_path, GPUBENCH_FAKE_SLOW_CASES="1.5:op=copy", GPUBENCH_FAKE_SLOW_ONCE=str(marker))
    assert once.returncode == 0, once.stdout + once.stderr
    assert "WORSE once, SAME on a rerun" in (tmp_path / "summary.md").read_text()
    lab = tmp_path / "results" / "lab"
    blip = sorted(lab.glob("2*"))[-1]
    rec = memory.recorded(blip)
    assert rec["worse"] == [] and rec["rerun"].startswith("../confirm/lab/")
    # a plain compare of that night later reads the same verdict: the recorded rerun confirms it again
    from gpubench.cli import main

    assert main(["compare", str(lab), str(blip), "--out", str(tmp_path / "again.json")]) == 0
    again = json.loads((tmp_path / "again.json").read_text())
    assert any("confirmed with the rerun recorded for this run" in n for n in again["notes"])
    after = nightly(tmp_path)
    assert after.returncode == 0, after.stdout + after.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert "recovered" not in summary and "WORSE since" not in summary
    assert blip.name in json.loads((tmp_path / "compare.json").read_text())["baseline"]["run_ids"]


def test_a_regression_the_nightly_confirms_stays_red_the_next_night(tmp_path):
    from test_compare_nightly import nightly

    for _ in range(4):
        assert nightly(tmp_path).returncode == 0
    slow = {"GPUBENCH_FAKE_SLOW_CASES": "1.5:op=copy"}
    first = nightly(tmp_path, **slow)
    assert first.returncode == 1
    lab = tmp_path / "results" / "lab"
    first_bad = sorted(lab.glob("2*"))[-1].name
    second = nightly(tmp_path, **slow)
    assert second.returncode == 1, second.stdout + second.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert summary.count(f"WORSE since {first_bad} (2 nights)") == 2
    assert f"regression: WORSE since {first_bad} (2 nights, 2 figures); between the last good run" in summary


def test_a_verdict_that_cannot_be_recorded_is_exit_2_with_a_way_out(capsys, base, tmp_path):
    lab = tmp_path / "results" / "lab"
    quiet_nights(capsys, base, lab)
    run = night(base, lab, 9)
    (run / memory.RECORD).mkdir()  # where the verdict goes, something that is no file (root writes anywhere)
    code, _, err = cli(capsys, "compare", lab, run)
    assert code == 2 and "cannot record the verdict" in err and "--no-record" in err
    code, _, _ = cli(capsys, "compare", lab, run, "--no-record")
    assert code == 0


def test_a_long_regression_keeps_its_window_on_the_nights_before_it(capsys, base, tmp_path, monkeypatch):
    from gpubench.compare import load

    monkeypatch.setattr(load, "SPREAD_HISTORY", 4)  # a history shorter than the regression, as after weeks of red
    lab = tmp_path / "results" / "lab"
    day = quiet_nights(capsys, base, lab)
    first_bad = run_id(day)
    for k in range(1, 7):
        code, doc = judge(capsys, lab, night(base, lab, day, slow=0.10), "--baseline-window", "3")
        day += 1
        assert code == 1 and verdicts(doc) == {WORSE}, k
        assert doc["baseline"]["run_ids"] == [run_id(i) for i in (2, 3, 4)]  # read past k - 1 regressed nights
    assert {r["since"] for r in doc["rows"] if r["status"] == "compared"} == {first_bad}


def test_a_directory_as_the_current_side_is_its_latest_run_whole(capsys, base, tmp_path):
    lab = tmp_path / "results" / "lab"
    day = quiet_nights(capsys, base, lab)
    cases = sorted(set(results.load(base)["case"]))
    shared = night(base, lab, day, slow=0.5, meta=lambda m: m.update(
        contention={"contended": "pid 4842 (python3)", "cases": {"elementwise": cases}}))
    code, doc = judge(capsys, lab, lab)  # the latest run, even though it shared its GPU: never an older one
    assert doc["current"]["run_ids"] == [shared.name] and code == 0
    assert doc["contention"] == ["GPU shared during the current run: pid 4842 (python3)"]


def test_a_run_that_cannot_be_read_is_left_out_with_a_note_naming_it(capsys, base, tmp_path):
    lab = tmp_path / "results" / "lab"
    day = quiet_nights(capsys, base, lab)
    cut = night(base, lab, day)  # a crash mid-write: its table cut short
    table = next(cut.glob("*.parquet"))
    table.write_bytes(table.read_bytes()[:100])
    bad_json = night(base, lab, day + 1)
    (bad_json / "run.json").write_text('{"schema_version": 5, "run_id": ')  # and one whose run.json is cut short
    code, doc = judge(capsys, lab, night(base, lab, day + 2))
    assert code == 0 and verdicts(doc) == {SAME}
    assert doc["window"].endswith("left out: 2 unreadable")
    (note,) = [n for n in doc["notes"] if "cannot be read" in n]
    assert cut.name in note and bad_json.name in note and "run.json" in note
