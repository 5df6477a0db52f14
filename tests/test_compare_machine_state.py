"""The machine's state never makes compare refuse (exit 2): a busy host leaves a run out for the figures the host
sets only, a shared GPU for the figures of that GPU, and a figure without a clean baseline is UNKNOWN, saying why;
exit 0 or 1 as usual (synthetic quick-set nights)."""

from __future__ import annotations

import json

from synthetic_nights import make_nights
from test_compare_helpers import cli

from gpubench.compare import gate_memory as memory


def verdicts(capsys, lab, tonight):
    code, out, err = cli(capsys, "compare", lab, tonight, "--no-record", "--format", "json")
    assert code in (0, 1), err
    return code, json.loads(out)


def test_a_directory_of_busy_nights_judges_the_gpu_s_figures_and_not_the_host_s(capsys, tmp_path):
    runs = make_nights(tmp_path / "lab", 7, busy=range(7))  # every night read a busy host, tonight's too
    code, doc = verdicts(capsys, runs[0].parent, runs[-1])
    assert code == 0
    host = [r for r in doc["rows"] if r["set_by_host"]]
    gpu = [r for r in doc["rows"] if not r["set_by_host"] and r["status"] == "compared"]
    assert host and all(r["status"] == "compared" and r["verdict"] == "UNKNOWN" for r in host)
    assert all("no clean baseline" in r["note"] and "6 run(s) on a busy host" in r["note"] for r in host)
    assert all(r["catches"] is None and r["catches_limit"] == "no clean baseline" for r in host)  # blind
    assert len(gpu) == 106 and {r["runs_baseline"] for r in gpu} == {5}  # a window of the busy nights
    assert "left out: 6 busy host (for the figures the host sets)" in doc["window"]
    assert any(line.startswith("host busy during the current run") for line in doc["contention"])


def test_a_busy_directory_still_catches_a_slower_gpu(capsys, tmp_path):
    runs = make_nights(tmp_path / "lab", 7, busy=range(7), slow={r"gemm .* throughput": 1.1}, slow_from=6)
    code, doc = verdicts(capsys, runs[0].parent, runs[-1])
    assert code == 1
    worse = {(r["suite"], r["metric"]) for r in doc["rows"] if r["verdict"] == "WORSE"}
    assert worse == {("gemm", "throughput")}


def test_busy_nights_leave_the_host_s_figures_to_the_clean_ones(capsys, tmp_path):
    runs = make_nights(tmp_path / "lab", 9, busy=(5, 6, 7))  # three busy nights among clean ones
    code, doc = verdicts(capsys, runs[0].parent, runs[-1])
    assert code == 0
    rows = {(r["case"], r["metric"]): r for r in doc["rows"]}
    launch = rows[("measure=host_launch,api=torch,nodes=1", "time")]
    gemm = next(r for (c, m), r in rows.items() if c.startswith("shape=") and m == "throughput")
    # the host's figure skips the busy nights (its window: nights 0-4); the GPU's takes the latest five
    assert launch["runs_baseline"] == 15 and gemm["runs_baseline"] == 5
    assert doc["baseline"]["run_ids"][-1] == runs[-2].name


def test_a_directory_of_shared_nights_is_unknown_not_an_error(capsys, tmp_path):
    def shared(k, meta, tables):
        meta["contention"] = {**meta["contention"], "contended": "pid 4321 (python3)"}

    runs = make_nights(tmp_path / "lab", 4, alter=shared)
    make_nights(tmp_path / "lab", 1, first=4)  # tonight alone on its GPU
    lab = runs[0].parent
    code, doc = verdicts(capsys, lab, sorted(lab.iterdir())[-1])
    assert code == 0
    compared = [r for r in doc["rows"] if r["status"] == "compared"]
    assert len(compared) == 147 and all(r["verdict"] == "UNKNOWN" for r in compared)
    assert all("4 run(s) on a shared GPU" in r["note"] for r in compared)
    assert doc["baseline"]["run_ids"] == [] and memory.SHARED in doc["window"]
    # and the human views say it in one line
    code, out, _ = cli(capsys, "compare", lab, sorted(lab.iterdir())[-1], "--no-record")
    assert code == 0 and "147 UNKNOWN" in out.splitlines()[0]
