"""gpubench check's judgement on evidence built by hand: envelopes, the spec fallback, peers, noise, retries, a
shared GPU, SKIP never counted as PASS; the check set; the pair schedule; envelopes made and read back."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpubench.check import checkset, drive, envelope
from gpubench.check.checkset import Evidence, Figure
from gpubench.check.judge import Judge, interval
from gpubench.check.verdicts import NodeVerdict, Verdict, worst
from gpubench.errors import UsageError

HBM = Figure("hbm", "HBM bandwidth", "elementwise", r"op=triad,dtype=fp32,array_bytes=\d+,impl=torch", "bandwidth",
             largest="array_bytes")
LAUNCH = Figure("launch", "launch", "launch", "measure=host_launch,api=torch,nodes=1", "time")
H100 = "NVIDIA H100 80GB HBM3"
ROOT = Path(__file__).resolve().parent.parent


def _samples(value: float, cv: float = 0.002, n: int = 12, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(value * (1 + cv * rng.standard_normal(n)))


def _ev(gpu: int, value: float, figure: Figure = HBM, device: str = "Fake GPU", **row) -> Evidence:
    better = "lower" if figure.metric == "time" else "higher"
    unit = "us" if figure.metric == "time" else "GB/s"
    samples = row.pop("samples", _samples(value, seed=gpu))
    r = {"status": "ok", "value": float(np.median(samples)), "samples": samples, "unit": unit, "better": better,
         "device": device, "device_index": gpu, "case": "op=triad,dtype=fp32,array_bytes=4194304,impl=torch",
         "roof": "memory" if figure is HBM else None, "contended": "", "host_load": 0.0, **row}
    return Evidence(figure, f"gpu{gpu}", gpu, None, r)


def _by_gpu(verdicts: list[Verdict]) -> dict[int, Verdict]:
    return {v.gpu: v for v in verdicts}


def _env(typical=96.0, warn=91.0, fail=86.0, key="hbm", unit="GB/s", better="higher") -> envelope.Envelope:
    e = envelope.Entry(unit, better, typical, warn, fail, 6, 0.001)
    return envelope.Envelope("Fake GPU", "^Fake GPU$", {key: e}, "test runs", "/x/fake.toml")


def test_one_gpu_20_percent_slower_than_its_three_peers_fails_and_they_pass():
    evs = [_ev(0, 96.0), _ev(1, 96.1), _ev(2, 95.9), _ev(3, 76.8)]
    v = _by_gpu(Judge(None).all(evs))
    assert v[3].state == "FAIL" and "20% below its 3 peers' median" in v[3].text
    assert v[3].confidence == 1.0 and v[3].peers == 3
    assert all(v[i].state == "PASS" for i in (0, 1, 2)), [v[i].text for i in (0, 1, 2)]
    assert v[0].peer_median == pytest.approx(96.0, rel=0.01)  # the slow GPU does not move its peers' median


def test_a_time_mirrors_the_rules():
    evs = [_ev(i, t, LAUNCH) for i, t in enumerate((5.0, 5.02, 4.98, 6.5))]
    v = _by_gpu(Judge(None).all(evs))
    assert v[3].state == "FAIL" and "30% above" in v[3].text and "µs" in v[3].text
    assert v[0].state == "PASS"


def test_five_to_ten_percent_from_the_peers_is_a_warn_and_within_noise_is_a_pass():
    v = _by_gpu(Judge(None).all([_ev(0, 96.0), _ev(1, 96.0), _ev(2, 89.0)]))
    assert v[2].state == "WARN" and "7% below" in v[2].text
    noisy = [_ev(0, 96.0), _ev(1, 96.0), _ev(2, 85.0, samples=_samples(85.0, cv=0.2, seed=5))]
    v = _by_gpu(Judge(None).all(noisy))
    # 11 % below its peers, but its own samples reach the peers' band: nothing fires on noise
    assert v[2].state == "PASS" and v[2].ci[1] > 96.0 * 0.95


def test_a_figure_the_host_sets_is_held_to_its_envelope_not_to_its_peers():
    # 2 × H100, 2026-11-25: the GPUs' host-timed launch read 6 % and 28 % apart on idle nodes; a device figure that
    # far apart is a WARN, a host-timed one is the host's and every GPU of the node shares the host
    env = _env(9.4, 13.5, 16.3, key="launch", unit="us", better="lower")
    launch = [_ev(0, 7.27, LAUNCH, timing_method="host clock"), _ev(1, 9.34, LAUNCH, timing_method="host clock")]
    v = _by_gpu(Judge(env).all(launch))
    assert {x.state for x in v.values()} == {"PASS"} and v[1].peer_median == pytest.approx(7.27, rel=0.01)
    slow = [_ev(0, 9.78, LAUNCH, timing_method="host clock"), _ev(1, 17.0, LAUNCH, timing_method="host clock")]
    assert _by_gpu(Judge(env).all(slow))[1].state == "FAIL"
    alone = _by_gpu(Judge(None).all(launch))[1]
    assert alone.state == "SKIP" and "the host sets this figure" in alone.text
    assert _by_gpu(Judge(None).all([_ev(0, 96.0), _ev(1, 90.0)]))[1].state == "WARN"


def test_a_collective_over_a_shared_gpu_is_not_failed():
    # 2 × H100, 2026-11-25: a co-tenant on GPU 1 alone took all_reduce and sendrecv to 57 % of typical
    node = Evidence(Figure("all_reduce", "ar", "comm", "x", "busbw", target="node"), "node", None, None,
                    {**_ev(0, 187.0).row, "unit": "GB/s"})
    judge = Judge(_env(327.0, 310.0, 294.0, key="all_reduce"), retry=lambda ev: pytest.fail("no retry"),
                  foreign={0: {}, 1: {2587: "pid 2587 (python3)"}})
    v = judge.one(node, [])
    assert v.state == "WARN" and "pid 2587" in v.text
    pair = Evidence(node.figure, "gpu0-gpu1", None, (0, 1), node.row)
    assert judge.one(pair, []).state == "WARN"


def test_all_four_slow_without_an_envelope_fail_against_the_spec_fallback():
    # 0.72 of the H100's 3,350 GB/s, under the fallback's 0.80; peers agree with each other, so only the spec says so
    evs = [_ev(i, 2412.0 + i, device=H100) for i in range(4)]
    verdicts = Judge(None).all(evs)
    assert {v.state for v in verdicts} == {"FAIL"}
    assert all("72% of spec" in v.text and "spec fallback" in v.reference for v in verdicts), verdicts[0]
    assert verdicts[0].fail_at == pytest.approx(0.80 * 3350)
    healthy = Judge(None).all([_ev(i, 3040.0 + i, device=H100) for i in range(4)])
    assert {v.state for v in healthy} == {"PASS"}


def test_the_envelope_wins_over_the_spec_and_says_where_it_comes_from():
    v = Judge(_env(3040, 2900, 2750)).one(_ev(0, 2700.0, device=H100), [])
    assert v.state == "FAIL" and v.fail_at == 2750 and "envelope fake.toml (test runs)" in v.reference
    assert "89% of typical 3,040" in v.text
    assert Judge(_env(3040, 2900, 2750)).one(_ev(0, 2850.0, device=H100), []).state == "WARN"
    assert Judge(_env(3040, 2900, 2750)).one(_ev(0, 3000.0, device=H100), []).state == "PASS"


def test_below_the_floor_then_a_retry_that_reaches_it_passes_with_the_note():
    tried = []

    def retry(ev):
        tried.append(ev.target)
        return 95.5

    v = Judge(_env(), retry=retry).one(_ev(0, 70.0), [])
    assert tried == ["gpu0"] and v.state == "PASS" and v.retry == 95.5
    assert "retry in a fresh process reached" in v.text and any("first 70" in n for n in v.notes)
    again = Judge(_env(), retry=lambda ev: 71.0).one(_ev(0, 70.0), [])
    assert again.state == "FAIL" and "(retry: 71)" in again.text and again.retry == 71.0
    gone = Judge(_env(), retry=lambda ev: None).one(_ev(0, 70.0), [])
    assert gone.state == "FAIL" and any("could not measure" in n for n in gone.notes)


def test_a_shared_gpu_is_never_failed_on_performance_and_the_pid_is_named():
    ev = _ev(0, 60.0, contended="pid 4242 (python3)")
    v = Judge(_env(), retry=lambda ev: pytest.fail("no retry for a shared GPU")).one(ev, [])
    assert v.state == "WARN" and "pid 4242 (python3)" in v.text and "not judged" in v.text
    seen = Judge(_env(), foreign={0: {77: "pid 77 (burn)"}}).one(_ev(0, 60.0), [])
    assert seen.state == "WARN" and "pid 77 (burn)" in seen.text
    # between the lines (a pair beside a co-tenant on one of its GPUs, 2 x H200, 2026-11-28): the line names it too
    between = Judge(_env()).one(_ev(0, 89.0, contended="pid 4242 (python3)"), [])
    assert between.state == "WARN" and "below what healthy GPUs read" in between.text and "pid 4242" in between.text
    fine = Judge(_env()).one(_ev(0, 96.0, contended="pid 4242 (python3)"), [])
    assert fine.state == "PASS" and any("pid 4242" in n for n in fine.notes)
    # a shared GPU is no peer either: its figure would drag the median down
    v = _by_gpu(Judge(None).all([_ev(0, 96.0), _ev(1, 96.0), _ev(2, 40.0, contended="pid 9 (x)"), _ev(3, 80.0)]))
    assert v[3].peers == 2 and v[3].state == "FAIL"


def test_a_busy_host_excuses_only_the_figures_the_host_sets():
    host_timed = _ev(0, 9.0, LAUNCH, host_load=0.9, timing_method="host clock")
    assert Judge(_env(5, 5.5, 6.0, key="launch", unit="us", better="lower")).one(host_timed, []).state == "WARN"
    device = _ev(0, 60.0, host_load=0.9)
    assert Judge(_env()).one(device, []).state == "FAIL"


def test_what_cannot_be_judged_is_skip_with_the_reason_never_pass():
    lonely = Judge(None).one(_ev(0, 96.0), [])
    assert lonely.state == "SKIP" and "nothing to hold it against" in lonely.text
    skipped = Evidence(HBM, "gpu0", 0, None, {"status": "skipped", "value": math.nan, "message": "needs a GPU"},
                       "needs a GPU")
    assert Judge(_env()).one(skipped, []).state == "SKIP"
    wrong = Evidence(HBM, "gpu0", 0, None, {"status": "invalid", "value": 1.0, "contended": "pid 1 (x)"}, "max err 3")
    assert Judge(_env()).one(wrong, []).state == "FAIL"  # wrong results are never excused
    node = NodeVerdict("n", [Verdict("hbm", "gpu0", "SKIP", "x"), Verdict("ecc", "gpu0", "SKIP", "y")])
    assert node.state == "SKIP" and node.exit_code() == 0
    assert worst(["SKIP", "PASS"]) == "PASS" and worst(["SKIP", "WARN", "PASS"]) == "WARN" and worst([]) == "SKIP"
    strict = NodeVerdict("n", [Verdict("hbm", "gpu0", "WARN", "x")], strict=True)
    assert strict.exit_code() == 1 and NodeVerdict("n", strict.verdicts).exit_code() == 0


def test_headline_names_the_worst_first():
    vs = [Verdict("hbm", "gpu3", "FAIL", "2,210 GB/s, 66% of spec", gpu=3),
          Verdict("pcie_link", "gpu5", "FAIL", "PCIe x8 of x16", kind="fact", gpu=5),
          Verdict("launch", "gpu1", "WARN", "7 µs", gpu=1), Verdict("ecc", "gpu0", "PASS", "none", kind="fact", gpu=0)]
    line = NodeVerdict("h100-07", vs).headline()
    assert line == "node h100-07: FAIL — GPU 3 hbm 2,210 GB/s, 66% of spec; GPU 5 PCIe x8 of x16"


def test_interval_is_deterministic_and_needs_three_samples():
    s = _samples(100.0, cv=0.01)
    assert interval(s) == interval(list(s)) and interval(s)[0] < np.median(s) < interval(s)[1]
    assert interval([1.0, 2.0]) is None


def test_rounds_pair_every_gpu_once_in_disjoint_rounds():
    for n in range(2, 9):
        schedule = drive.rounds(list(range(n)))
        pairs = [p for r in schedule for p in r]
        assert sorted(pairs) == list(itertools.combinations(range(n), 2)), n
        for r in schedule:
            ends = [g for p in r for g in p]
            assert len(ends) == len(set(ends)), (n, r)
    eight = drive.rounds(list(range(8)))
    assert len(eight) == 7 and all(len(r) == 4 for r in eight)


def test_the_shipped_check_set_loads_and_selects_its_cases():
    figures = checkset.load()
    keys = [f.key for f in figures]
    assert {"hbm", "gemm_bf16", "gemm_fp8", "launch", "h2d", "d2h", "peer", "all_reduce", "sendrecv"} <= set(keys)
    suites, pattern = checkset.devices_filter(figures)
    assert suites == ["elementwise", "gemm", "launch", "copy"]
    import re

    rx = re.compile(pattern)
    assert rx.search("op=triad,dtype=fp32,array_bytes=1073741824,impl=torch")
    assert not rx.search("op=triad,dtype=bf16,array_bytes=1073741824,impl=torch")
    assert rx.search("direction=peer,memory=device,src=gpu0,dst=gpu3,copy_bytes=1073741824")


def test_a_bad_check_set_is_one_line(tmp_path):
    bad = tmp_path / "c.toml"
    bad.write_text('[[figure]]\nkey = "x"\ntitle = "x"\nsuite = "s"\ncase = "("\nmetric = "m"\n')
    with pytest.raises(UsageError, match="figure 1 \\(x\\)"):
        checkset.load(bad)
    bad.write_text('[[figure]]\nkey = "x"\ntitle = "x"\nsuite = "s"\ncase = "a"\nmetric = "m"\nrun = "elsewhere"\n')
    with pytest.raises(UsageError, match="run must be one of"):
        checkset.load(bad)


def test_evidence_takes_the_largest_ok_size_and_a_pair_by_its_slowest_direction():
    rows = []
    for size, value, status in ((1 << 20, 50.0, "ok"), (1 << 30, 55.0, "ok"), (1 << 31, math.nan, "skipped")):
        rows.append({"suite": "copy", "metric": "bandwidth", "status": status, "value": value, "device_index": 0,
                     "better": "higher", "case": f"direction=h2d,memory=pinned,src=host,dst=gpu0,copy_bytes={size}",
                     "copy_bytes": size, "src": "host", "dst": "gpu0"})
    for src, dst, dev, value in ((0, 1, 0, 300.0), (1, 0, 0, 280.0), (1, 0, 1, 310.0), (0, 1, 1, 305.0)):
        rows.append({"suite": "copy", "metric": "bandwidth", "status": "ok", "value": value, "device_index": dev,
                     "better": "higher", "case": f"direction=peer,memory=device,src=gpu{src},dst=gpu{dst},copy_bytes=1",
                     "copy_bytes": 1, "src": f"gpu{src}", "dst": f"gpu{dst}"})
    df = pd.DataFrame(rows)
    h2d = Figure("h2d", "h2d", "copy", r"direction=h2d,memory=pinned,src=host,dst=gpu\d+,copy_bytes=\d+", "bandwidth",
                 largest="copy_bytes")
    (e,) = checkset.evidence(h2d, df, "run")
    assert e.value == 55.0 and e.target == "gpu0"
    peer = Figure("peer", "peer", "copy", r"direction=peer,memory=device,src=gpu\d+,dst=gpu\d+,copy_bytes=\d+",
                  "bandwidth", target="pair", largest="copy_bytes")
    (p,) = checkset.evidence(peer, df, "run")
    assert p.pair == (0, 1) and p.target == "gpu0-gpu1" and p.value == 280.0


def test_envelope_entry_margins_and_round_trip(tmp_path):
    e = envelope.entry([3000, 3010, 3020, 2990, 3005], "GB/s", "higher", host_set=False)
    assert e.typical == 3005 and e.fail_at == pytest.approx(3005 * 0.9, rel=1e-3)
    assert e.warn_at == pytest.approx(3005 * 0.95, rel=1e-3)
    t = envelope.entry([5.0, 5.1, 4.9], "us", "lower", host_set=True)
    assert t.fail_at == pytest.approx(5.0 * 1.25) and t.warn_at == pytest.approx(5.0 * 1.10)
    wide = envelope.entry([100, 80, 120, 90, 110], "GB/s", "higher", host_set=False)
    assert wide.fail_at < 100 * 0.9  # a figure that moves this much gets a margin of several spreads
    env = envelope.Envelope(H100, r"^NVIDIA H100 80GB HBM3$", {"hbm": e, "launch": t}, "3 runs", meta={"runs": 3})
    path = envelope.write(env, tmp_path / "x.toml")
    back = envelope.load_file(path)
    assert back.entries == env.entries and back.matches(H100) and not back.matches("NVIDIA H200")
    assert back.meta["runs"] == 3


def test_envelope_files_are_checked(tmp_path):
    p = tmp_path / "e.toml"
    p.write_text('format = "other"\nversion = 1\n')
    with pytest.raises(UsageError, match="not a gpubench envelope"):
        envelope.load_file(p)
    p.write_text('format = "gpubench-expect"\nversion = 99\n')
    with pytest.raises(UsageError, match="upgrade gpubench"):
        envelope.load_file(p)
    assert envelope.for_device(H100, "none") is None


def test_shipped_envelopes_load_and_name_their_provenance():
    shipped = {Path(e.path).name: e for e in envelope.shipped()}
    assert {"h100-sxm.toml", "h200.toml", "mi300x.toml"} <= set(shipped)
    for env in shipped.values():
        assert env.entries and env.source and env.match
        for key, e in env.entries.items():
            worse = (lambda a, b: a < b) if e.better == "higher" else (lambda a, b: a > b)
            if e.typical is None:  # published floors only: labelled so, no warning band
                assert e.warn_at is None and "published" in env.source, (env.path, key)
                continue
            assert worse(e.fail_at, e.warn_at) and worse(e.warn_at, e.typical), (env.path, key)
    # the measured ones come from runs recorded in this repository
    for name in ("h100-sxm.toml", "h200.toml"):
        made_by = shipped[name].meta["made_by"]
        assert all(Path(ROOT, p).is_dir() for p in made_by.split() if p.startswith("results/reference/")), made_by
    assert envelope.for_device(H100).path.endswith("h100-sxm.toml")
    assert envelope.for_device("NVIDIA H200").path.endswith("h200.toml")
    assert envelope.for_device("AMD Instinct MI300X").path.endswith("mi300x.toml")
    assert envelope.for_device("NVIDIA H100 PCIe") is None and envelope.for_device("NVIDIA GH200 480GB") is None


def test_pcie_nominal_rates():
    assert envelope.pcie_gbps(5, 16) == pytest.approx(63.0, rel=1e-3)
    assert envelope.pcie_gbps(4, 16) == pytest.approx(31.5, rel=1e-3)
    assert envelope.pcie_gbps(2, 16) == pytest.approx(8.0)
    assert envelope.pcie_gbps(None, 16) is None
    row = {"roof": "host link", "better": "higher", "unit": "GB/s", "device": "x"}
    th = envelope.thresholds("h2d", row, None, envelope.pcie_gbps(5, 16))
    assert th.fail_at == pytest.approx(0.70 * 63.0, rel=1e-3) and "PCIe link" in th.reference


def test_fleet_peers_take_other_nodes_of_the_same_model_and_never_a_shared_gpu(tmp_path):
    import json

    from gpubench.check.node import fleet_peers, read_all

    def node(host, started, values, model=H100, shared=()):
        verdicts = [{"check": "hbm", "kind": "performance", "value": v, "state": "PASS", "gpu": i,
                     "notes": ["measured while the GPU was shared with pid 9 (x)"] if i in shared else []}
                    for i, v in enumerate(values)]
        d = tmp_path / host / started
        d.mkdir(parents=True)
        (d / "check.json").write_text(json.dumps({"format": "gpubench-check", "version": 1, "host": host,
                                                  "started": started,
                                                  "gpus": [{"name": model}], "verdicts": verdicts}))

    node("a", "2026-11-25T10:00:00Z", [3000.0, 3010.0])
    node("a", "2026-11-25T11:00:00Z", [3020.0, 3030.0])  # the newest check of a node counts
    node("b", "2026-11-25T10:00:00Z", [2990.0, 1500.0], shared=(1,))
    node("c", "2026-11-25T10:00:00Z", [4300.0], model="NVIDIA H200")
    assert [d["host"] for d in read_all(tmp_path)] == ["a", "b", "c"]
    assert sorted(fleet_peers(tmp_path, H100, "me")["hbm"]) == [2990.0, 3020.0, 3030.0]
    assert sorted(fleet_peers(tmp_path, H100, "a")["hbm"]) == [2990.0]  # a node is not its own peer

    newer = tmp_path / "z" / "x"
    newer.mkdir(parents=True)
    (newer / "check.json").write_text(json.dumps({"format": "gpubench-check", "version": 99, "host": "z"}))
    with pytest.raises(UsageError, match="newer than this gpubench reads .*upgrade gpubench"):
        read_all(tmp_path)
