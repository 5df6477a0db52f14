"""Tests of gpubench.check.facts. No GPU or vendor library is needed: pynvml and amdsmi are replaced by small fake
modules that behave like the real ones' Python API (NVMLError carries its code in ``.value``; amdsmi returns
dicts), and /proc by a directory tree."""

from __future__ import annotations

import enum
import json
import os
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from gpubench.check import facts as fx
from gpubench.check.facts import (AmdSmiFacts, FactsWatch, FakeFacts, NullFacts, NvmlFacts, judge, open_facts,
                                  process_tree)

ME = os.getpid()

# ------------------------------------------------------------------------------------------------- fake /proc


def fake_proc(root: Path, procs: dict[int, tuple[int, str]]) -> Path:
    """A /proc with ``procs`` {pid: (ppid, comm)}; stat lines as the kernel writes them (utime, stime at 14, 15)."""
    root.mkdir(parents=True, exist_ok=True)
    for pid, (ppid, comm) in procs.items():
        d = root / str(pid)
        d.mkdir()
        (d / "comm").write_text(comm + "\n")
        (d / "stat").write_text(f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 10 0 0 0 7 3 0 0 20 0 1 0 9\n")
    return root


@pytest.fixture
def proc(tmp_path):
    # This test process (ours), a worker of ours, and a stranger running python3.
    return fake_proc(tmp_path / "proc", {1: (0, "init"), ME: (1, "pytest"), 5001: (ME, "worker"),
                                         4242: (1, "python3")})


def test_process_tree_over_fake_proc(tmp_path):
    p = fake_proc(tmp_path / "proc", {1: (0, "init"), 10: (1, "bash"), 11: (10, "python"), 12: (10, "torchrun"),
                                      13: (12, "worker (rank 0)"), 20: (1, "sshd")})
    assert process_tree(10, proc=p) == {10, 11, 12, 13}
    assert process_tree(12, proc=p) == {12, 13}
    assert process_tree(20, proc=p) == {20}
    assert process_tree(99, proc=p) == {99}  # not in /proc: the root alone
    assert process_tree(7, proc=tmp_path / "nowhere") == {7}


# ------------------------------------------------------------------------------------------------------ NVML

NOT_SUPPORTED, INVALID_ARGUMENT, GPU_IS_LOST = 3, 2, 15


class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(value)
        self.value = value

    def __str__(self):
        return {NOT_SUPPORTED: "Not Supported", INVALID_ARGUMENT: "Invalid Argument"}.get(self.value, "GPU is lost")


class Dev:
    """One GPU as the fake NVML sees it; healthy H100 SXM defaults. ``gen``/``width`` are per-poll scripts: each read
    takes the next value and the last one repeats."""

    def __init__(self, uuid="GPU-aaaa-0000", bus="00000000:1B:00.0", **kw):
        self.uuid, self.bus = uuid, bus
        self.max_gen, self.max_width = kw.get("max_gen", 5), kw.get("max_width", 16)
        self.gen, self.width = list(kw.get("gen", [5])), list(kw.get("width", [16]))
        self.ecc_mode = kw.get("ecc_mode", 1)
        self.ecc = {0: kw.get("ecc_volatile", 0), 1: kw.get("ecc_aggregate", 0)}
        self.remap = kw.get("remap", (0, 0, 0, 0))
        self.pages_pending = kw.get("pages_pending")  # None: NOT_SUPPORTED, as on Ampere and later
        self.links = kw.get("links", [1] * 18)  # None: not a link (NOT_SUPPORTED)
        self.link_error = kw.get("link_error")
        self.reasons = kw.get("reasons", 0)
        self.compute, self.graphics = kw.get("compute", []), kw.get("graphics", [])
        self.broken = set(kw.get("broken", ()))  # calls that raise NOT_SUPPORTED

    def check(self, name):
        if name in self.broken or "all" in self.broken:
            raise NVMLError(NOT_SUPPORTED)

    @staticmethod
    def take(script):
        return script.pop(0) if len(script) > 1 else script[0]


def fake_nvml(devices):
    nv = types.ModuleType("pynvml")
    nv.calls = []
    nv.NVMLError = NVMLError
    nv.NVML_NVLINK_MAX_LINKS, nv.NVML_FEATURE_ENABLED = 18, 1
    nv.NVML_ERROR_NOT_SUPPORTED, nv.NVML_ERROR_INVALID_ARGUMENT = NOT_SUPPORTED, INVALID_ARGUMENT
    nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC, nv.NVML_AGGREGATE_ECC = 1, 0, 1
    nv.nvmlInit = lambda: nv.calls.append("init")
    nv.nvmlShutdown = lambda: nv.calls.append("shutdown")

    def by(attr):
        def find(key):
            for d in devices:
                if getattr(d, attr) == key:
                    return d
            raise NVMLError(INVALID_ARGUMENT)
        return find

    def by_index(i):
        if not 0 <= i < len(devices):
            raise NVMLError(INVALID_ARGUMENT)
        return devices[i]

    nv.nvmlDeviceGetHandleByIndex = by_index
    nv.nvmlDeviceGetHandleByUUID = by("uuid")
    nv.nvmlDeviceGetHandleByPciBusId = by("bus")

    def api(name, fn):
        def call(h, *args):
            h.check(name)
            return fn(h, *args)
        setattr(nv, name, call)

    api("nvmlDeviceGetMaxPcieLinkGeneration", lambda h: h.max_gen)
    api("nvmlDeviceGetMaxPcieLinkWidth", lambda h: h.max_width)
    api("nvmlDeviceGetCurrPcieLinkGeneration", lambda h: Dev.take(h.gen))
    api("nvmlDeviceGetCurrPcieLinkWidth", lambda h: Dev.take(h.width))
    api("nvmlDeviceGetEccMode", lambda h: [h.ecc_mode, h.ecc_mode])

    def ecc(h, kind, counter):
        assert kind == 1, "only uncorrected errors are read"
        return h.ecc[counter]

    def pages_pending(h):
        if h.pages_pending is None:
            raise NVMLError(NOT_SUPPORTED)
        return h.pages_pending

    def link_state(h, link):
        if h.link_error:
            raise NVMLError(h.link_error)
        if link >= len(h.links) or h.links[link] is None:
            raise NVMLError(NOT_SUPPORTED if link < len(h.links) else INVALID_ARGUMENT)
        return h.links[link]

    api("nvmlDeviceGetTotalEccErrors", ecc)
    api("nvmlDeviceGetRemappedRows", lambda h: h.remap)
    api("nvmlDeviceGetRetiredPagesPendingStatus", pages_pending)
    api("nvmlDeviceGetNvLinkState", link_state)
    api("nvmlDeviceGetCurrentClocksEventReasons", lambda h: h.reasons)
    api("nvmlDeviceGetCurrentClocksThrottleReasons", lambda h: h.reasons)
    api("nvmlDeviceGetComputeRunningProcesses", lambda h: [types.SimpleNamespace(pid=p) for p in h.compute])
    api("nvmlDeviceGetGraphicsRunningProcesses", lambda h: [types.SimpleNamespace(pid=p) for p in h.graphics])
    return nv


def check_nvml(dev, proc, polls=1, own=None, **judge_kw):
    """The verdicts for one fake GPU after ``polls`` polls, by check key."""
    reader = NvmlFacts([(0, None, None)], nvml=fake_nvml([dev]))
    watch = FactsWatch(reader, [(0, None, None)], own_pids=own or (lambda: {ME}), proc=proc)
    for _ in range(polls):
        watch.poll_once()
    verdicts = judge(0, reader.static(0), watch.seen(0), **judge_kw)
    reader.close()
    assert [v.check for v in verdicts] == list(fx.CHECKS)
    return {v.check: v for v in verdicts}


def states(verdicts):
    return {k: v.state for k, v in verdicts.items()}


def test_nvml_healthy_gpu_passes_every_fact(proc):
    v = check_nvml(Dev(compute=[ME]), proc, polls=3)
    assert states(v) == dict.fromkeys(fx.CHECKS, "PASS")
    assert v["pcie_link"].text == "PCIe Gen5 x16 (of Gen5 x16)"
    assert v["ecc"].text == "no uncorrected ECC errors"
    assert v["row_remap"].text == "no remap pending; rows remapped: 0 for uncorrectable errors, 0 for correctable"
    assert v["nvlink"].text == "18 of 18 NVLink links up"
    assert v["throttle"].text == "no throttling seen"
    assert v["processes"].text == "no other process on the GPU"
    for check, verdict in v.items():
        assert (verdict.kind, verdict.target, verdict.gpu) == ("fact", "gpu0", 0)
        assert verdict.title == fx.TITLES[check]
        assert "\n" not in verdict.text


def test_nvml_static_and_seen_dicts(proc):
    reader = NvmlFacts([(0, None, None)], nvml=fake_nvml([Dev(gen=[1, 5], reasons=0x4, compute=[ME, 4242])]))
    static = reader.static(0)
    assert set(static) == set(fx.STATIC_KEYS) | {"interconnect", "why"}
    assert static["pcie_max_gen"] == 5 and static["ecc_enabled"] is True and static["remap_failure"] is False
    assert static["retired_pages_pending"] is None and static["nvlink"] == [1] * 18
    assert set(reader.poll(0)) == set(fx.POLL_KEYS)
    watch = FactsWatch(reader, [0], own_pids=lambda: {ME}, proc=proc)
    watch.poll_once()
    watch.poll_once()
    seen = watch.seen(0)
    assert (seen["pcie_gen"], seen["pcie_width"], seen["throttle"]) == (5, 16, ["SwPowerCap"])
    assert seen["foreign"] == {4242: "pid 4242 (python3)"} and seen["polls"] == 2
    assert (seen["hidden_others"], seen["hidden_pids"]) == (0, [])
    (proc / "4242" / "comm").unlink()  # the stranger ends: its name is the one first seen
    watch.poll_once()
    assert watch.seen(0)["foreign"] == {4242: "pid 4242 (python3)"}


def test_nvml_x8_of_x16_fails(proc):
    v = check_nvml(Dev(width=[8]), proc, polls=3)
    assert (v["pcie_link"].state, v["pcie_link"].text) == ("FAIL", "PCIe x8 of x16")


def test_nvml_gen4_of_gen5_fails(proc):
    v = check_nvml(Dev(gen=[4]), proc, polls=3)
    assert v["pcie_link"].state == "FAIL"
    assert v["pcie_link"].text == "PCIe Gen4 of Gen5 (the highest seen while the check ran)"


def test_nvml_gen_and_width_both_low(proc):
    v = check_nvml(Dev(gen=[3], width=[4]), proc)
    assert v["pcie_link"].text == "PCIe Gen3 x4 of Gen5 x16 (the highest seen while the check ran)"


def test_nvml_idle_gen1_then_gen5_under_load_passes(proc):
    # An idle GPU parks its link at Gen1; only the highest generation seen under load counts.
    v = check_nvml(Dev(gen=[1, 1, 5, 5, 1]), proc, polls=5)
    assert (v["pcie_link"].state, v["pcie_link"].text) == ("PASS", "PCIe Gen5 x16 (of Gen5 x16)")
    # Never loaded: Gen1 is all there is, and it is not passed.
    assert check_nvml(Dev(gen=[1]), proc, polls=2)["pcie_link"].state == "FAIL"


def test_nvml_ecc_volatile_fails(proc):
    v = check_nvml(Dev(ecc_volatile=2, ecc_aggregate=7), proc)
    assert (v["ecc"].state, v["ecc"].text) == ("FAIL", "2 uncorrected ECC errors since the driver loaded")


def test_nvml_ecc_aggregate_only_warns(proc):
    v = check_nvml(Dev(ecc_volatile=0, ecc_aggregate=3), proc)
    assert v["ecc"].state == "WARN"
    assert v["ecc"].text == "3 uncorrected errors in the GPU's lifetime, none since the driver loaded"


def test_nvml_ecc_off_or_absent_skips(proc):
    assert (check_nvml(Dev(ecc_mode=0), proc)["ecc"].state, check_nvml(Dev(ecc_mode=0), proc)["ecc"].text) == (
        "SKIP", "ECC is off")
    v = check_nvml(Dev(broken={"nvmlDeviceGetEccMode"}), proc)
    assert (v["ecc"].state, v["ecc"].text) == ("SKIP", "no ECC reporting")


@pytest.mark.parametrize("remap,state,text", [
    ((0, 0, 1, 0), "WARN", "row remap pending: reset the GPU to apply it"),
    ((0, 1, 0, 1), "FAIL", "row remapping failed: the GPU needs service; "
                           "1 rows remapped for uncorrectable errors, 0 for correctable"),
    ((3, 2, 0, 0), "WARN", "2 rows remapped for uncorrectable errors, 3 for correctable"),
    ((5, 0, 0, 0), "PASS", "no remap pending; rows remapped: 0 for uncorrectable errors, 5 for correctable"),
])
def test_nvml_row_remapping(proc, remap, state, text):
    v = check_nvml(Dev(remap=remap), proc)
    assert (v["row_remap"].state, v["row_remap"].text) == (state, text)


def test_nvml_retired_pages_before_ampere(proc):
    # Volta: no row remapper (NOT_SUPPORTED), retired pages instead.
    v = check_nvml(Dev(broken={"nvmlDeviceGetRemappedRows"}, pages_pending=1), proc)
    assert (v["row_remap"].state, v["row_remap"].text) == (
        "WARN", "retired pages pending: reset the GPU to retire them")
    v = check_nvml(Dev(broken={"nvmlDeviceGetRemappedRows"}, pages_pending=0), proc)
    assert (v["row_remap"].state, v["row_remap"].text) == ("PASS", "no retired pages pending")
    v = check_nvml(Dev(broken={"nvmlDeviceGetRemappedRows"}), proc)
    assert v["row_remap"].state == "SKIP"


def test_nvml_two_nvlinks_down_fail(proc):
    links = [1] * 18
    links[3] = links[7] = 0
    v = check_nvml(Dev(links=links), proc)
    assert (v["nvlink"].state, v["nvlink"].text) == ("FAIL", "NVLink: 16 of 18 links up (links 3, 7 down)")


def test_nvml_no_nvlink_or_unreadable_skips(proc):
    v = check_nvml(Dev(links=[None] * 18), proc)  # an L4: every link NOT_SUPPORTED
    assert (v["nvlink"].state, v["nvlink"].text) == ("SKIP", "no NVLink on this GPU")
    v = check_nvml(Dev(links=[1] * 12), proc)  # fewer links than NVML's maximum: invalid argument past them
    assert (v["nvlink"].state, v["nvlink"].text) == ("PASS", "12 of 12 NVLink links up")
    v = check_nvml(Dev(link_error=GPU_IS_LOST), proc)  # not a missing link: unknown, never "no NVLink"
    assert (v["nvlink"].state, v["nvlink"].text) == ("SKIP", "NVLink state not readable")
    v = check_nvml(Dev(links=[0] * 18), proc)  # a PCIe card without a bridge
    assert v["nvlink"].state == "SKIP" and "0 of 18 links up" in v["nvlink"].text


def test_nvml_hw_slowdown_fails(proc):
    v = check_nvml(Dev(reasons=0x8 | 0x4), proc, polls=2)
    assert (v["throttle"].state, v["throttle"].text) == ("FAIL", "hardware throttling: HwSlowdown")
    assert "reasons seen: HwSlowdown, SwPowerCap" in v["throttle"].notes


def test_nvml_power_cap_passes_with_a_note(proc):
    v = check_nvml(Dev(reasons=0x4), proc, polls=2)
    assert (v["throttle"].state, v["throttle"].text) == ("PASS", "SwPowerCap only: not a fault")
    assert any("DCGM issue #285" in n for n in v["throttle"].notes)


def test_nvml_sw_thermal_and_unknown_reasons_warn(proc):
    v = check_nvml(Dev(reasons=0x20), proc)
    assert (v["throttle"].state, v["throttle"].text) == ("WARN", "thermal throttling: SwThermalSlowdown")
    v = check_nvml(Dev(reasons=0x1000), proc)
    assert (v["throttle"].state, v["throttle"].text) == ("WARN", "throttle reason not recognised: Unknown0x1000")


def test_throttle_reasons_seen_only_once_and_row_reasons_count(proc):
    dev = Dev()
    reader = NvmlFacts([(0, None, None)], nvml=fake_nvml([dev]))
    watch = FactsWatch(reader, [0], own_pids=lambda: {ME}, proc=proc)
    watch.poll_once()
    dev.reasons = 0x40  # one poll of HwThermalSlowdown is enough
    watch.poll_once()
    dev.reasons = 0
    watch.poll_once()
    v = {x.check: x for x in judge(0, reader.static(0), watch.seen(0))}
    assert (v["throttle"].state, v["throttle"].text) == ("FAIL", "hardware throttling: HwThermalSlowdown")
    # The rows' reasons (a telemetry summary string) join the polled ones.
    quiet = FactsWatch(reader, [0], own_pids=lambda: {ME}, proc=proc)
    quiet.poll_once()
    v = {x.check: x for x in judge(0, reader.static(0), quiet.seen(0), row_throttle={"HwPowerBrakeSlowdown,GpuIdle"})}
    assert (v["throttle"].state, v["throttle"].text) == ("FAIL", "hardware throttling: HwPowerBrakeSlowdown")


def test_nvml_foreign_pid_warns_with_its_name(proc):
    v = check_nvml(Dev(compute=[ME, 5001], graphics=[4242]), proc, own=lambda: {ME, 5001})
    assert (v["processes"].state, v["processes"].text) == ("WARN", "GPU shared with pid 4242 (python3)")


def test_processes_names_from_rows_and_more_than_three(proc):
    static, seen = FakeFacts([(0, None, None)], env={}).static(0), fx.empty_seen()
    seen["foreign"] = {4242: "pid 4242 (python3)"}
    rows = {7: "pid 7 (torchrun)", 8: "vllm", 9: "pid 9 (a)", 10: "pid 10 (b)"}
    v = {x.check: x for x in judge(0, static, seen, row_pids=rows)}
    assert v["processes"].text == "GPU shared with pid 7 (torchrun), pid 8 (vllm), pid 9 (a) and 2 more"
    assert v["processes"].notes == ["pid 10 (b)", "pid 4242 (python3)"]
    # Rows that saw nobody, and no poll: known, nobody.
    v = {x.check: x for x in judge(0, static, fx.empty_seen(), row_pids={})}
    assert v["processes"].state == "PASS"


def test_pids_of_another_namespace_are_counted(proc):
    # In a container NVML lists the host's pids: ours is one of them, but which cannot be told.
    v = check_nvml(Dev(compute=[90001, 90002, 90003]), proc)
    assert (v["processes"].state, v["processes"].text) == (
        "WARN", "GPU shared with 2 other processes (host pids 90001 90002 90003)")
    assert check_nvml(Dev(compute=[90001]), proc)["processes"].state == "PASS"


def test_own_pids_asked_only_for_new_pids_and_ours_stay_ours(proc):
    asked = []

    def own():
        asked.append(1)
        return {ME, 5001} if len(asked) == 1 else {ME}  # the worker exits after the first poll

    dev = Dev(compute=[ME, 5001, 4242])
    reader = NvmlFacts([(0, None, None)], nvml=fake_nvml([dev]))
    watch = FactsWatch(reader, [0], own_pids=own, proc=proc)
    for _ in range(4):
        watch.poll_once()
    assert len(asked) == 1  # 4242 was found a stranger once; no new pid since
    dev.compute = [ME, 5001, 4242, 5002]
    watch.poll_once()
    assert len(asked) == 2 and sorted(watch.seen(0)["foreign"]) == [4242, 5002]  # 5001 stayed ours


def test_own_pids_failure_leaves_processes_unknown(proc):
    def broken():
        raise OSError("no /proc")

    v = check_nvml(Dev(compute=[4242]), proc, own=broken)
    assert v["processes"].state == "SKIP"


def test_nvml_not_supported_everywhere_never_passes(proc):
    v = check_nvml(Dev(broken={"all"}, links=[None] * 18), proc, polls=3)
    assert states(v) == dict.fromkeys(fx.CHECKS, "SKIP")
    assert v["pcie_link"].text == "PCIe link not readable"
    assert v["throttle"].text == "throttle reasons not readable"


def test_every_fact_unknown_never_passes():
    static, seen = fx.unknown_static(None), fx.empty_seen()
    assert {v.state for v in judge(5, static, seen)} == {"SKIP"}


def test_nvml_matches_uuid_then_pci_not_index(proc):
    devs = [Dev("GPU-aaaa", "00000000:1B:00.0"), Dev("GPU-bbbb", "00000000:2C:00.0", width=[8])]
    reader = NvmlFacts([(0, "bbbb", None), (1, None, "0000:1b:00.0")], nvml=fake_nvml(devs))
    assert reader.poll(0)["pcie_width"] == 8 and reader.poll(1)["pcie_width"] == 16
    reader.close()


def test_nvml_unknown_device_skips_with_reason(proc):
    nv = fake_nvml([Dev()])
    reader = NvmlFacts([(0, "dead-beef", None)], nvml=nv)
    v = {x.check: x for x in judge(0, reader.static(0), FactsWatch(reader, [0], lambda: {ME}, proc=proc).seen(0))}
    assert {x.state for x in v.values()} == {"SKIP"}
    assert "no NVML device" in v["pcie_link"].text and "no NVML device" in v["processes"].text
    assert nv.calls.count("shutdown") == 1  # the failed lookup let NVML go


def test_missing_pynvml_skips_with_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import now fails
    reader = open_facts("cuda", [(0, None, None)])
    assert isinstance(reader, NullFacts) and reader.why == fx.NVML_HINT
    assert reader.why == "nvidia-ml-py is not installed: pip install nvidia-ml-py"
    verdicts = judge(0, reader.static(0), fx.empty_seen())
    assert {v.state for v in verdicts} == {"SKIP"}
    assert all("pip install nvidia-ml-py" in v.text for v in verdicts)


def test_open_facts_uses_pynvml_and_survives_a_broken_one(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([Dev()]))
    assert open_facts("cuda", [(0, None, None)]).static(0)["pcie_max_width"] == 16
    broken = fake_nvml([Dev()])
    broken.nvmlInit = lambda: (_ for _ in ()).throw(NVMLError(9))  # driver not loaded
    monkeypatch.setitem(sys.modules, "pynvml", broken)
    reader = open_facts("cuda", [(0, None, None)])
    assert all(v.state == "SKIP" for v in judge(0, reader.static(0), fx.empty_seen()))
    assert "nvmlInit failed" in reader.static(0)["why"]["ecc"]


def test_cpu_backend_gets_null_facts():
    reader = open_facts("cpu", [])
    assert isinstance(reader, NullFacts) and "cpu" in reader.why
    assert reader.poll(0) == dict.fromkeys(fx.POLL_KEYS)


# ------------------------------------------------------------------------------------------------------ fake


def test_fake_facts_default_healthy(monkeypatch):
    monkeypatch.delenv(fx.FAKE_ENV, raising=False)
    reader = open_facts("fake", [(0, None, None), (1, None, None)])
    assert isinstance(reader, FakeFacts)
    watch = FactsWatch(reader, [0, 1], own_pids=lambda: {ME})
    watch.poll_once()
    for gpu in (0, 1):
        v = judge(gpu, reader.static(gpu), watch.seen(gpu))
        assert {x.state for x in v} == {"PASS"}, [(x.check, x.text) for x in v]


@pytest.mark.parametrize("over,gpu,check,state,text", [
    ({"3": {"pcie_width": 8}}, 3, "pcie_link", "FAIL", "PCIe x8 of x16"),
    ({"1": {"throttle": ["HwSlowdown"]}}, 1, "throttle", "FAIL", "hardware throttling: HwSlowdown"),
    ({"1": {"throttle": "SwThermalSlowdown"}}, 1, "throttle", "WARN", "thermal throttling: SwThermalSlowdown"),
    ({"2": {"ecc_uncorrected": 4}}, 2, "ecc", "FAIL", "4 uncorrected ECC errors since the driver loaded"),
    ({"0": {"pids": [4242]}}, 0, "processes", "WARN", "GPU shared with pid 4242 (not visible here)"),
    ({"2": {"nvlink_down": [3, 7]}}, 2, "nvlink", "FAIL", "NVLink: 16 of 18 links up (links 3, 7 down)"),
    ({"1": {"remap_pending": True}}, 1, "row_remap", "WARN", "row remap pending: reset the GPU to apply it"),
])
def test_fake_facts_overrides(monkeypatch, over, gpu, check, state, text):
    monkeypatch.setenv(fx.FAKE_ENV, json.dumps(over))
    gpus = [(i, None, None) for i in range(4)]
    reader = open_facts("fake", gpus)
    watch = FactsWatch(reader, gpus, own_pids=lambda: {ME}, proc=Path("/nonexistent-proc"))
    watch.poll_once()
    for i in range(4):
        v = {x.check: x for x in judge(i, reader.static(i), watch.seen(i))}
        if i == gpu:
            assert (v[check].state, v[check].text) == (state, text)
            assert sum(x.state != "PASS" for x in v.values()) == 1
        else:
            assert {x.state for x in v.values()} == {"PASS"}  # the others keep the healthy defaults


@pytest.mark.parametrize("raw,why", [
    ("{not json", "not JSON"),
    ('{"0": {"pcie_widht": 8}}', "unknown field pcie_widht"),
    ('{"zero": {"pcie_width": 8}}', "entry 'zero'"),
    ('{"0": {"pids": "4242"}}', "pids must be a list"),
    ("[1]", "not a JSON object"),
])
def test_fake_facts_malformed_variable_skips_everything(raw, why):
    reader = FakeFacts([(0, None, None)], env={fx.FAKE_ENV: raw})
    verdicts = judge(0, reader.static(0), fx.empty_seen())
    assert {v.state for v in verdicts} == {"SKIP"}
    assert why in reader.why and fx.FAKE_ENV in verdicts[0].text


# ---------------------------------------------------------------------------------------------------- amdsmi


class PageStatus(enum.IntEnum):
    RESERVED = 0
    PENDING = 1
    UNRESERVABLE = 2


class AmdDev:
    def __init__(self, bdf="0000:0c:00.0", uuid="aaaa-0000", **kw):
        self.bdf, self.uuid = bdf, uuid
        self.static = kw.get("static", {"max_pcie_width": 16, "max_pcie_speed": 32000, "pcie_interface_version": 5,
                                        "slot_type": "OAM"})
        self.metric = {"pcie_width": kw.get("width", 16), "pcie_speed": kw.get("speed", 32000),
                       "pcie_bandwidth": 100, "pcie_replay_count": 0}
        self.ecc_mask = kw.get("ecc_mask", 0x3FF)
        self.uncorrectable = kw.get("uncorrectable", 0)
        self.bad_pages = kw.get("bad_pages", [])
        self.procs = kw.get("procs", [])
        self.violation = kw.get("violation", {"acc_counter": 1, "active_ppt_pwr": False,
                                              "active_socket_thrm": False, "active_prochot_thrm": False})
        self.xgmi = kw.get("xgmi", {"status": ["U"] * 7 + ["X"], "total_links": 8})


def fake_amdsmi(devices, xgmi_api=True):
    smi = types.ModuleType("amdsmi")
    smi.AmdSmiMemoryPageStatus = PageStatus
    smi.amdsmi_init = lambda: None
    smi.amdsmi_shut_down = lambda: None
    smi.amdsmi_get_processor_handles = lambda: list(devices)
    smi.amdsmi_get_gpu_device_bdf = lambda h: h.bdf
    smi.amdsmi_get_gpu_device_uuid = lambda h: h.uuid
    smi.amdsmi_get_pcie_info = lambda h: {"pcie_static": dict(h.static), "pcie_metric": dict(h.metric)}
    smi.amdsmi_get_gpu_ecc_enabled = lambda h: h.ecc_mask
    smi.amdsmi_get_gpu_total_ecc_count = lambda h: {"correctable_count": 12, "uncorrectable_count": h.uncorrectable,
                                                    "deferred_count": 0}
    smi.amdsmi_get_gpu_bad_page_info = lambda h: [{"value": i, "page_address": 0x1000 * i, "page_size": 4096,
                                                   "status": s} for i, s in enumerate(h.bad_pages)]
    smi.amdsmi_get_gpu_process_list = lambda h: [{"name": n, "pid": p, "mem": 0} for p, n in h.procs]
    smi.amdsmi_get_violation_status = lambda h: dict(h.violation)
    smi.amdsmi_get_gpu_metrics_info = lambda h: {"throttle_status": 0}
    if xgmi_api:
        smi.amdsmi_get_gpu_xgmi_link_status = lambda h: dict(h.xgmi)
    return smi


def check_amd(dev, proc, polls=2, xgmi_api=True):
    reader = AmdSmiFacts([(0, None, None)], amdsmi=fake_amdsmi([dev], xgmi_api=xgmi_api))
    watch = FactsWatch(reader, [0], own_pids=lambda: {ME}, proc=proc)
    for _ in range(polls):
        watch.poll_once()
    return {v.check: v for v in judge(0, reader.static(0), watch.seen(0))}


def test_amdsmi_healthy_mi300(proc):
    v = check_amd(AmdDev(procs=[(ME, "pytest")]), proc)
    assert states(v) == dict.fromkeys(fx.CHECKS, "PASS"), {k: x.text for k, x in v.items()}
    assert v["pcie_link"].text == "PCIe Gen5 x16 (of Gen5 x16)"
    assert v["nvlink"].text == "7 of 7 XGMI links up" and v["nvlink"].title == "XGMI"
    assert v["row_remap"].text == "no retired pages pending (0 pages retired)"


def test_amdsmi_x8_link_fails(proc):
    v = check_amd(AmdDev(width=8), proc)
    assert (v["pcie_link"].state, v["pcie_link"].text) == ("FAIL", "PCIe x8 of x16")


def test_amdsmi_rocm7_generation_fields(proc):
    # ROCm 7 names the highest generation, and its docs give speeds in GT/s.
    static = {"max_pcie_width": 16, "max_pcie_speed": 32, "max_pcie_interface_version": 5, "slot_type": "OAM"}
    v = check_amd(AmdDev(static=static, speed=16000), proc)
    assert v["pcie_link"].text == "PCIe Gen4 of Gen5 (the highest seen while the check ran)"


def test_amdsmi_ecc_count_fails_without_a_since_claim(proc):
    v = check_amd(AmdDev(uncorrectable=4), proc)
    assert (v["ecc"].state, v["ecc"].text) == ("FAIL", "4 uncorrected ECC errors")
    assert check_amd(AmdDev(ecc_mask=0), proc)["ecc"].text == "ECC is off"


def test_amdsmi_bad_pages(proc):
    v = check_amd(AmdDev(bad_pages=[PageStatus.RESERVED, PageStatus.PENDING]), proc)
    assert (v["row_remap"].state, v["row_remap"].text) == (
        "WARN", "retired pages pending: reset the GPU to retire them")
    v = check_amd(AmdDev(bad_pages=[0, 2]), proc)
    assert (v["row_remap"].state, v["row_remap"].text) == (
        "FAIL", "a bad page could not be retired: the GPU needs service")
    assert check_amd(AmdDev(bad_pages=[0, 0]), proc)["row_remap"].text == "no retired pages pending (2 pages retired)"


def test_amdsmi_process_list_names_the_stranger(proc):
    v = check_amd(AmdDev(procs=[(ME, "pytest"), (4242, "python3")]), proc)
    assert (v["processes"].state, v["processes"].text) == ("WARN", "GPU shared with pid 4242 (python3)")


def test_amdsmi_xgmi_link_down_and_missing_api(proc):
    v = check_amd(AmdDev(xgmi={"status": ["U", "D", "U", "U", "U", "U", "U", "X"], "total_links": 8}), proc)
    assert (v["nvlink"].state, v["nvlink"].text) == ("FAIL", "XGMI: 6 of 7 links up (link 1 down)")
    v = check_amd(AmdDev(), proc, xgmi_api=False)
    assert v["nvlink"].state == "SKIP" and fx.NOT_ON_ROCM in v["nvlink"].text


def test_amdsmi_throttle_from_violation_status(proc):
    power = {"active_ppt_pwr": True, "active_socket_thrm": False, "active_prochot_thrm": False}
    v = check_amd(AmdDev(violation=power), proc)
    assert (v["throttle"].state, v["throttle"].text) == ("PASS", "ppt_pwr only: not a fault")
    hot = {"active_ppt_pwr": False, "active_socket_thrm": True, "active_prochot_thrm": True}
    assert check_amd(AmdDev(violation=hot), proc)["throttle"].text == "hardware throttling: prochot_thrm"


def test_missing_amdsmi_skips_with_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    reader = open_facts("hip", [(0, None, None)])
    assert isinstance(reader, NullFacts) and reader.why == fx.AMDSMI_HINT
    assert {v.state for v in judge(0, reader.static(0), fx.empty_seen())} == {"SKIP"}


# ------------------------------------------------------------------------------------------------- the thread


class Counting(fx.FactsReader):
    """A reader that counts polls and sets ``done`` after ``target`` of them, so tests need not guess timings."""

    def __init__(self, target=3, fail=False):
        super().__init__([(0, None, None)])
        self.polls, self.target, self.fail = 0, target, fail
        self.done = threading.Event()

    def poll(self, gpu):
        self.polls += 1
        if self.polls >= self.target:
            self.done.set()
        if self.fail:
            raise RuntimeError("driver gone")
        return {"pcie_gen": min(self.polls, 5), "pcie_width": 16, "throttle": [], "pids": []}


@pytest.fixture
def no_thread_errors(monkeypatch):
    seen = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args))
    return seen


def test_watch_thread_polls_and_stops_within_a_second(no_thread_errors):
    reader = Counting(target=4)
    t0 = time.monotonic()
    with FactsWatch(reader, [0], own_pids=lambda: {ME}, interval_s=0.01) as watch:
        assert watch._thread.daemon and watch._thread.is_alive()
        assert reader.done.wait(1.0)
    assert not watch._thread.is_alive()
    assert time.monotonic() - t0 < 1.0
    seen = watch.seen(0)
    assert seen["polls"] >= 4 and seen["pcie_gen"] == min(seen["polls"], 5) and seen["throttle"] == []
    assert no_thread_errors == []


def test_watch_stops_promptly_with_a_long_interval():
    with FactsWatch(Counting(), [0], own_pids=lambda: {ME}, interval_s=30) as watch:
        t0 = time.monotonic()
    # Event.wait wakes on exit; a sleep(interval) loop would take 30 s here.
    assert time.monotonic() - t0 < 1.0 and not watch._thread.is_alive()
    assert watch.seen(0)["polls"] == 1  # the poll on entry


def test_watch_survives_a_reader_that_raises(no_thread_errors):
    reader = Counting(target=3, fail=True)
    with FactsWatch(reader, [0], own_pids=lambda: {ME}, interval_s=0.005) as watch:
        assert reader.done.wait(1.0)
    assert watch.seen(0) == fx.empty_seen()  # nothing read: every fact stays unknown
    assert no_thread_errors == []


def test_watch_does_not_swallow_block_exceptions():
    with pytest.raises(ZeroDivisionError):
        with FactsWatch(Counting(), [0], own_pids=lambda: {ME}, interval_s=30) as watch:
            1 / 0
    assert not watch._thread.is_alive()
