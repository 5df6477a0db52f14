"""The copy suite's plumbing on the fake backend (grid, bytes, timing modes, checks, NUMA columns), its
skips on the CPU, and the topology helpers it reads (a fake /sys tree, fake NVML and amdsmi)."""

import contextlib
import importlib
import os

import pytest
import torch

from gpubench.timing import engine
from gpubench.run import runner
from gpubench.machine import topology
from gpubench.backends.cpu import CpuBackend
from gpubench.backends.fake import FakeBackend
from gpubench.suite import Case, GridContext, Method, Workload

C = importlib.import_module("gpubench.suites.copy")
CFG = engine.EngineConfig(min_samples=3, budget_s=0.01, min_warmup_s=0.0, max_warmup_s=0.01, min_sample_s=1e-9)
MiB, GiB = 1 << 20, 1 << 30


def ctx(**kw):
    base = dict(backend="fake", quick=False, cache_bytes=1 << 20, memory_bytes=1 << 30)
    return GridContext(**{**base, **kw})


def ids(grid):
    return [(c["direction"], c["memory"], c["src"], c["dst"], c["copy_bytes"]) for c in grid]


def test_grid_covers_every_direction_and_host_memory_kind():
    grid = ids(C.Copy().cases(ctx(sizes=(MiB,))))
    assert grid == [
        ("h2d", "pinned", "host", "gpu0", MiB), ("d2h", "pinned", "gpu0", "host", MiB),
        ("bidir", "pinned", "host", "gpu0", MiB),
        ("h2d", "pageable", "host", "gpu0", MiB), ("d2h", "pageable", "gpu0", "host", MiB),
        ("h2d", "registered", "host", "gpu0", MiB), ("d2h", "registered", "gpu0", "host", MiB),
        ("d2d", "device", "gpu0", "gpu0", MiB),
    ]
    assert {c["copy_bytes"] for c in C.Copy().cases(ctx())} == set(C.SIZES)
    quick = list(C.Copy().cases(ctx(quick=True)))
    assert {c["copy_bytes"] for c in quick if c["memory"] != "pageable"} == set(C.QUICK_SIZES)
    # pageable copies, flat in rate from 16 MiB and slow to make and time at a GiB, are timed at 256 MiB in a quick run
    assert sorted({c["copy_bytes"] for c in quick if c["memory"] == "pageable"}) == [MiB, 256 * MiB]
    assert len([c for c in quick if c["memory"] == "pageable"]) == 4  # h2d and d2h at both sizes
    # sizes asked for are taken as asked
    assert {c["copy_bytes"] for c in C.Copy().cases(ctx(quick=True, sizes=(GiB,)))} == {GiB}
    assert min(C.SIZES) == 4 << 10 and max(C.SIZES) >= 1 << 30  # the 4 KiB … ≥ 1 GiB


def test_peer_cases_are_both_directions_to_every_other_gpu():
    grid = ids(C.Copy().cases(ctx(sizes=(MiB,), device_index=1, device_count=3)))
    peers = [(s, d) for direction, _, s, d, _ in grid if direction == "peer"]
    # the k-th peer is the GPU k + 1 places after this one: in a --devices run every GPU copies to another at once
    assert peers == [("gpu1", "gpu2"), ("gpu2", "gpu1"), ("gpu1", "gpu0"), ("gpu0", "gpu1")]
    assert not [g for g in C.Copy().cases(ctx(sizes=(MiB,))) if g["direction"] == "peer"]  # one GPU: none


def test_every_gpu_of_a_fleet_lays_out_the_same_peer_cases_relative_to_itself():
    copy = C.Copy()
    keys = []
    for me in range(4):
        c = ctx(sizes=(MiB,), device_index=me, device_count=4)
        grid = list(copy.cases(c))
        keys.append([copy.fleet_key(case, c) for case in grid])
        # at the k-th peer case every GPU writes to a different GPU: no GPU takes every other's copies
    assert keys[0] == keys[1] == keys[2] == keys[3] and "src=self,dst=peer+1" in ",".join(keys[0])
    targets = [[case["dst"] for case in copy.cases(ctx(sizes=(MiB,), device_index=me, device_count=4))
                if case["direction"] == "peer" and case["src"] == f"gpu{me}"] for me in range(4)]
    for k in range(3):
        assert len({t[k] for t in targets}) == 4


def test_runner_tells_the_grid_which_device_and_how_many():
    p = runner.plan([C.Copy()], FakeBackend(device_index=1), quick=True, sizes=[MiB])
    peers = [c for c in p.cases["copy"] if c["direction"] == "peer"]
    assert [(c["src"], c["dst"]) for c in peers] == [("gpu1", "gpu0"), ("gpu0", "gpu1")]


def prepare(direction, memory, size=MiB, src="host", dst="gpu0", backend=None):
    case = Case.of(direction=direction, memory=memory, src=src, dst=dst, copy_bytes=size)
    return C.Copy().prepare(case, backend or FakeBackend()), case


def test_bytes_are_counted_once_per_copy_and_both_ways_for_bidir():
    assert prepare("h2d", "pinned")[0].bytes == MiB
    assert prepare("d2d", "device", src="gpu0")[0].bytes == MiB  # read + write, counted once (nvbandwidth)
    assert prepare("bidir", "pinned")[0].bytes == 2 * MiB
    assert prepare("bidir", "pinned")[0].footprint == 2 * MiB


def test_page_locked_copies_are_held_and_pageable_ones_host_timed_with_a_sync():
    for memory in ("pinned", "registered"):
        w, _ = prepare("h2d", memory)
        assert (w.method.timing, w.method.hold, w.method.context) == ("device", True, None)
    be = FakeBackend()
    syncs = []
    be.synchronize = lambda: syncs.append(1)
    w, _ = prepare("d2h", "pageable", src="gpu0", dst="host", backend=be)
    assert (w.method.timing, w.method.hold) == ("host", False)
    assert w.extra["timing_method"] == "host clock, copy + sync"
    w.run(w.make_inputs())
    assert syncs == [1]  # the caller waits for its data
    with w.method.context():  # binds to the GPU's NUMA node (a no-op here: the fake GPU has none)
        pass


def run_cases(backend, sizes=(MiB,)):
    suite = C.Copy()
    rows = []
    for case in runner.plan([suite], backend, quick=True, sizes=list(sizes)).cases["copy"]:
        rows.extend(runner.run_case(suite, case, backend, {}, CFG, None))
    return rows


def test_every_case_runs_checked_on_the_fake_backend_at_the_modelled_bandwidth():
    rows = [r for r in run_cases(FakeBackend()) if r["metric"] == "bandwidth"]
    assert len(rows) == 10  # 8 + two peer directions (the fake host has 2 GPUs)
    for r in rows:
        assert r["status"] == "ok", r["message"]
        assert r["check_error"] == 0.0 and r["check_tolerance"] == 0.0
        per_call_s = 5e-6 + r["work_bytes"] / 100e9  # FakeBackend's default model
        assert r["value"] == pytest.approx(r["work_bytes"] / per_call_s / 1e9)
        assert {"gpu_numa", "host_numa", "numa_bound", "peer_access", "link", "timing_method"} <= r.keys()
    by = {(r["direction"], r["memory"]): r for r in rows}
    assert by[("peer", "device")]["issued_on"] in ("write", "read")
    assert by[("bidir", "pinned")]["work_bytes"] == 2 * MiB


def test_a_copy_that_did_not_happen_fails_its_check(monkeypatch):
    monkeypatch.setattr(C, "_one_copy", lambda b: None)
    rows = [r for r in run_cases(FakeBackend()) if r["metric"] == "bandwidth" and r["direction"] == "h2d"]
    assert rows and all(r["status"] == "invalid" for r in rows)
    assert "sampled bytes differ" in rows[0]["message"]


def _in_one_run(cases, c=None):
    """Each (direction, memory, size) prepared in turn with one suite context, as a run prepares them: three
    sets a case, all alive at once (a check's and two rotating ones), let go before the next case; the host
    buffers' addresses of each case."""
    c = c or ctx()
    out = []
    for direction, memory, size in cases:
        src, dst = ("gpu0", "host") if direction == "d2h" else ("host", "gpu0")
        case = Case.of(direction=direction, memory=memory, src=src, dst=dst, copy_bytes=size)
        w = C.Copy().prepare(case, FakeBackend(), c)
        sets = [w.make_inputs() for _ in range(3)]
        host_ends = {"h2d": [(0, 0)], "d2h": [(0, 1)], "bidir": [(0, 0), (1, 1)]}[direction]
        out.append([b.pairs[i][j].data_ptr() for b in sets for i, j in host_ends])
        del sets
    return out


def test_cases_of_one_memory_kind_and_size_take_the_same_host_buffers_in_turn():
    c = ctx()
    h2d, d2h, bidir = _in_one_run([("h2d", "pinned", MiB), ("d2h", "pinned", MiB), ("bidir", "pinned", MiB)], c)
    assert len(set(h2d)) == 3  # no two live sets share a buffer
    assert d2h == h2d  # d2h takes h2d's buffers, in the same order
    assert len(set(bidir)) == 6 and set(h2d) <= set(bidir)  # two a set: three more made
    pool = c.state["copy_host_pool"]
    for size, memory in ((2 * MiB, "pinned"), (2 * MiB, "pageable")):
        _in_one_run([("h2d", memory, size)], c)
        # another size or kind: a pool of its own, the last one's buffers let go
        assert c.state["copy_host_pool"] is not pool and len(c.state["copy_host_pool"].held) == 3
        pool = c.state["copy_host_pool"]


def test_a_set_let_go_gives_its_buffers_to_the_next_set_of_the_case():
    w, _ = prepare("h2d", "pinned")  # no run context: a pool of the case's own
    check_set = w.make_inputs()
    first = check_set.host.data_ptr()
    del check_set  # the engine drops the check's set before it makes the rotating ones
    rotating = [w.make_inputs() for _ in range(2)]
    assert rotating[0].host.data_ptr() == first and rotating[1].host.data_ptr() != first


def test_a_taken_buffer_is_filled_afresh_so_a_missed_copy_still_fails(monkeypatch):
    c = ctx()
    cases = [Case.of(direction="h2d", memory="pinned", src="host", dst="gpu0", copy_bytes=64 << 10),
             Case.of(direction="d2h", memory="pinned", src="gpu0", dst="host", copy_bytes=64 << 10)]
    h2d = C.Copy().prepare(cases[0], FakeBackend(), c).make_inputs()
    was = h2d.host.data_ptr()
    del h2d
    d2h = C.Copy().prepare(cases[1], FakeBackend(), c).make_inputs()
    assert d2h.pairs[0][1].data_ptr() == was  # h2d's random source, now d2h's destination
    assert bool((d2h.pairs[0][1] == C._POISON).all())  # what h2d left there is gone
    suite = C.Copy()
    rows = []
    for direction, src, dst in (("h2d", "host", "gpu0"), ("d2h", "gpu0", "host")):
        case = Case.of(direction=direction, memory="registered", src=src, dst=dst, copy_bytes=MiB)
        if direction == "d2h":
            monkeypatch.setattr(C, "_one_copy", lambda b: None)
        rows += runner.run_case(suite, case, FakeBackend(), {}, CFG, None, ctx=c)
    status = {r["direction"]: r["status"] for r in rows if r["metric"] == "bandwidth"}
    assert status == {"h2d": "ok", "d2h": "invalid"}


def test_small_registered_buffers_share_one_registration(monkeypatch):
    made = []

    class Registered:
        def __init__(self, size):
            made.append(size)
            self.tensor = torch.empty(size, dtype=torch.uint8)

    monkeypatch.setattr(C, "_Registered", Registered)
    pool = C._HostPool.of(None, "registered", MiB, True)
    taken = [pool.take() for _ in range(70)]
    assert made == [64 * MiB, 64 * MiB]  # 64 buffers to a registration
    assert len({t.data_ptr() for t in taken}) == 70 and all(t.numel() == MiB for t in taken)
    pool = C._HostPool.of(None, "registered", 1 << 30, True)
    pool.take()
    assert made[-1] == 1 << 30  # one buffer larger than a chunk: a registration of its own


def test_destinations_start_poisoned_and_sources_random():
    w, _ = prepare("h2d", "pinned", size=64 << 10)
    b = w.make_inputs()
    src, dst = b.pairs[0]
    assert bool((dst == C._POISON).all())
    assert len(set(src.tolist())) > 200  # random bytes, never a constant


def test_too_big_for_the_device_is_skipped_with_the_reason():
    # d2d holds a source and a destination: 2 GiB, against 75 % of what is free, not of what is installed.
    with pytest.raises(C.Skip, match=r"needs 2 GiB of device buffers, over the 768 MiB a case may take \(75 % of 1 GiB"):
        prepare("d2d", "device", size=1 << 30, src="gpu0", backend=FakeBackend(memory_bytes=1 << 30))
    busy = FakeBackend(memory_bytes=80 << 30, available_bytes=2 << 30)  # another process holds the rest
    with pytest.raises(C.Skip, match="needs 2 GiB of device buffers, over the 1.5 GiB"):
        prepare("d2d", "device", size=1 << 30, src="gpu0", backend=busy)
    prepare("h2d", "pinned", size=1 << 30, backend=busy)  # 1 GiB fits


def test_cpu_backend_skips_every_case_and_says_why():
    rows = run_cases(CpuBackend(), sizes=(4096,))
    assert rows and all(r["status"] == "skipped" and "need a GPU" in r["message"] for r in rows)


def test_context_is_entered_around_the_measurement_and_left_on_failure():
    seen = []

    @contextlib.contextmanager
    def ctxmgr():
        seen.append("in")
        try:
            yield
        finally:
            seen.append("out")

    class S(C.Copy):
        def prepare(self, case, backend):
            def run(x):
                assert seen == ["in"]  # measured inside it
                raise RuntimeError("boom")
            return Workload(run=run, make_inputs=lambda: 1, method=Method(context=ctxmgr))

    rows = runner.run_case(S(), Case.of(direction="h2d", memory="pinned", src="host", dst="gpu0", copy_bytes=1),
                           FakeBackend(), {}, CFG, None)
    assert seen == ["in", "out"]
    assert rows[0]["status"] == "error" and "boom" in rows[0]["message"]


# --- topology --------------------------------------------------------------------------------------


def fake_sysfs(tmp_path, nodes):
    """A /sys with NUMA nodes {node: cpulist} and one GPU at 0000:19:00.0 on node 1."""
    root = tmp_path / "sys"
    node_dir = root / "devices/system/node"
    node_dir.mkdir(parents=True)
    (node_dir / "has_cpu").write_text(",".join(str(n) for n in nodes) + "\n")
    for n, cpus in nodes.items():
        (node_dir / f"node{n}").mkdir()
        (node_dir / f"node{n}/cpulist").write_text(cpus + "\n")
    dev = root / "bus/pci/devices/0000:19:00.0"
    dev.mkdir(parents=True)
    (dev / "numa_node").write_text("1\n")
    nonuma = root / "bus/pci/devices/0000:1a:00.0"
    nonuma.mkdir(parents=True)
    (nonuma / "numa_node").write_text("-1\n")
    return root


def test_cpulist_and_numa_lookups(tmp_path):
    assert topology.parse_cpulist("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}
    root = fake_sysfs(tmp_path, {0: "0-1", 1: "2-3"})
    assert topology.numa_nodes(root) == [0, 1]
    assert topology.node_cpus(1, root) == {2, 3}
    assert topology.pci_numa_node("00000000:19:00.0", root) == 1  # NVML's 8-digit domain, sysfs's 4
    assert topology.pci_numa_node("0000:1A:00.0", root) is None  # the kernel's -1: platform does not say
    assert topology.pci_numa_node("0000:99:00.0", root) is None
    assert topology.pci_numa_node(None, root) is None


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux affinity API")
def test_bind_to_node_restores_affinity_and_skips_single_node_hosts(tmp_path):
    before = os.sched_getaffinity(0)
    single = fake_sysfs(tmp_path / "a", {0: ",".join(map(str, sorted(before)))})
    with topology.bind_to_node(0, single) as b:
        assert not b.bound and os.sched_getaffinity(0) == before
    cpu = min(before)
    two = fake_sysfs(tmp_path / "b", {0: str(cpu), 1: "9999"})
    with topology.bind_to_node(0, two) as b:
        assert b.bound and os.sched_getaffinity(0) == {cpu}
    assert os.sched_getaffinity(0) == before
    with topology.bind_to_node(1, two) as b:  # no CPU of that node is ours: leave affinity alone
        assert not b.bound and os.sched_getaffinity(0) == before


def test_address_numa_node_of_touched_memory_is_a_real_node():
    import mmap

    buf = mmap.mmap(-1, 3 * mmap.PAGESIZE)
    buf.write(b"x" * len(buf))  # fault every page in
    import ctypes

    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    node = topology.address_numa_node(addr, len(buf))
    nodes = topology.numa_nodes()
    if nodes and os.uname().machine in topology._MOVE_PAGES:
        assert node in nodes
    else:
        assert node is None


class FakeNvml:
    NVML_P2P_CAPS_INDEX_NVLINK = 1
    NVML_P2P_STATUS_OK = 0
    NVML_NVLINK_MAX_LINKS = 18

    def __init__(self, nvlink, level=30, links=18):
        self.nvlink, self.level, self.links, self.calls = nvlink, level, links, []

    def nvmlInit(self):
        self.calls.append("init")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        return bus

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        assert index == self.NVML_P2P_CAPS_INDEX_NVLINK
        return 0 if self.nvlink else 3

    def nvmlDeviceGetNvLinkState(self, handle, link):
        if link >= self.links:
            raise RuntimeError("invalid argument")
        return 1

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return self.level


def test_gpu_link_names_nvlink_and_pcie_levels():
    nv = FakeNvml(nvlink=True)
    assert topology.gpu_link("cuda", "0000:19:00.0", "0000:3b:00.0", nvml=nv) == "NVLink (18 links active on the source)"
    assert nv.calls == ["init", "shutdown"]
    assert topology.gpu_link("cuda", "a", "b", nvml=FakeNvml(nvlink=False, level=50)) == "PCIe, across sockets (SYS)"
    assert topology.gpu_link("cuda", None, "b", nvml=nv) is None
    broken = FakeNvml(nvlink=True)
    broken.nvmlDeviceGetP2PStatus = None  # a library that cannot answer costs the column, not the run
    assert topology.gpu_link("cuda", "a", "b", nvml=broken) is None


def test_gpu_link_through_amdsmi():
    class Kind:
        name = "AMDSMI_LINK_TYPE_XGMI"

    class FakeAmdSmi:
        def amdsmi_init(self):
            pass

        def amdsmi_shut_down(self):
            pass

        def amdsmi_get_processor_handle_from_bdf(self, bdf):
            return bdf

        def amdsmi_topo_get_link_type(self, a, b):
            return {"type": Kind(), "hops": 1}

    assert topology.gpu_link("hip", "0000:0c:00.0", "0000:22:00.0", amdsmi=FakeAmdSmi()) == "XGMI (1 hop)"


def test_the_host_buffers_numa_node_reaches_the_rows(monkeypatch):
    # Known only once make_inputs has allocated the buffer: the row must carry what it found then.
    seen = []
    monkeypatch.setattr(C.topology, "address_numa_node", lambda addr, n: seen.append(n) or 3)
    rows = [r for r in run_cases(FakeBackend()) if r["metric"] == "bandwidth"]
    by = {(r["direction"], r["memory"]): r for r in rows}
    assert seen and by[("h2d", "pageable")]["host_numa"] == 3 and by[("bidir", "pinned")]["host_numa"] == 3
    assert by[("d2d", "device")]["host_numa"] is None  # no host buffer
