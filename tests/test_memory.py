"""Buffers sized from the memory available now: on a CPU with a huge last-level cache and little memory free
the elementwise grid shrinks with a note instead of skipping or being killed, every chosen size fits the
budget, a stated need is the real need, and the sampled check still catches a wrong kernel."""

import importlib

import pytest
import torch

from gpubench.timing import engine
from gpubench.machine import memory_budget as memory
from gpubench.run import runner
from gpubench.backends import cpu
from gpubench.backends.cpu import CpuBackend
from gpubench.backends.fake import FakeBackend
from gpubench.suite import Case, Skip

E = importlib.import_module("gpubench.suites.elementwise")
SMALL = engine.EngineConfig(min_samples=3, budget_s=0.05, min_warmup_s=0.0, max_warmup_s=0.05, min_sample_s=1e-4)
GiB, MiB = 1 << 30, 1 << 20


def test_available_memory_is_memavailable_not_the_total(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24684084 kB\nMemFree:         1000000 kB\nMemAvailable:    4194304 kB\n")
    assert memory.host_available_bytes(meminfo) == 4 * GiB
    assert memory.host_available_bytes(tmp_path / "absent") > 0  # sysconf's free pages instead


@pytest.fixture
def big_cache_little_memory(monkeypatch):
    """This CPU as the CI machine reports it: a 480 MiB last-level cache, with 5 GiB available."""
    monkeypatch.setattr(cpu, "_last_level_cache_bytes", lambda: 480 * MiB)
    # Where the library reads it and where the CPU backend does (its own name for the same function).
    monkeypatch.setattr(memory, "host_available_bytes", lambda meminfo=None: 5 * GiB)
    monkeypatch.setattr(cpu, "host_available_bytes", lambda meminfo=None: 5 * GiB)
    return CpuBackend()


@pytest.mark.parametrize("quick", [True, False])
def test_grid_shrinks_to_the_budget_with_a_note(big_cache_little_memory, quick):
    be = big_cache_little_memory
    assert memory.budget(be) == int(3.75 * GiB)
    p = runner.plan([E.Elementwise()], be, quick=quick)
    cases = p.cases["elementwise"]
    # 4× the cache is 2 GiB arrays (16×: 8 GiB); add and triad hold three of them and the check's scratch:
    # halved to 1 GiB (3 GiB and some MiB).
    assert {c["array_bytes"] for c in cases} == {GiB}
    assert len(cases) == 6 * (2 if quick else 4)  # every op and dtype still runs, none is skipped
    assert p.notes[0].startswith("elementwise: arrays of 1 GiB instead of 2 GiB (4× the 480 MiB cache)")
    assert len(p.notes) == (1 if quick else 2)
    for c in cases:
        need = E.case_bytes(E._op(c["op"]).arrays, c["array_bytes"], be.cache_bytes())
        assert need <= memory.budget(be)
        E.Elementwise().prepare(c, be)  # no Skip: the need the grid planned with is the one prepare checks


def test_enough_memory_keeps_the_sizes_and_says_nothing(monkeypatch):
    monkeypatch.setattr(cpu, "_last_level_cache_bytes", lambda: 480 * MiB)
    monkeypatch.setattr(memory, "host_available_bytes", lambda meminfo=None: 64 * GiB)
    p = runner.plan([E.Elementwise()], CpuBackend(), quick=True)
    assert {c["array_bytes"] for c in p.cases["elementwise"]} == {2 * GiB} and p.notes == []


def test_a_stated_need_is_the_real_need():
    # --sizes 300G on an H200 (141 GiB, 140 free): a copy holds two 300 GiB arrays and the check's scratch of
    # some MiB (the old message said ~3000 GiB, counting full fp64 copies the check no longer makes).
    be = FakeBackend(memory_bytes=141 * GiB, available_bytes=140 * GiB, cache_bytes=60 * MiB)
    case = Case.of(op="copy", dtype="fp32", array_bytes=300 * GiB, impl="torch")
    with pytest.raises(Skip, match=r"^needs 600.1 GiB, over the 105 GiB a case may take \(75 % of 140 GiB available\)$"):
        E.Elementwise().prepare(case, be)
    assert E.case_bytes(2, 300 * GiB, 60 * MiB) == 600 * GiB + E.CHECK_SCRATCH
    # Small arrays: the rotation past the cache, or the check's scratch, is what they need.
    assert E.case_bytes(2, MiB, 60 * MiB) == 64 * 2 * MiB  # the engine's cap of 64 sets
    assert E.case_bytes(1, 128 * MiB, 32 * MiB) == 128 * MiB + E.CHECK_SCRATCH


N = 10_000_000  # 40 MiB of fp32: several check chunks, a sample every 39th element


def _status(monkeypatch, op, kernel, dtype="fp32"):
    real = E._torch_run
    monkeypatch.setattr(E, "_torch_run", lambda name: kernel if name == op else real(name))
    size = N * E.DTYPES[dtype].itemsize
    rows = runner.run_case(E.Elementwise(), Case.of(op=op, dtype=dtype, array_bytes=size, impl="torch"),
                           CpuBackend(), {}, SMALL, None)
    return rows[0]["status"], rows[0]["message"]


def test_the_right_kernels_pass_the_sampled_check(monkeypatch):
    for op in E.OPS:
        assert _status(monkeypatch, op, E._torch_run(op)) == ("ok", "")


def test_a_wrong_scalar_is_invalid(monkeypatch):
    status, message = _status(monkeypatch, "mul", lambda x: torch.mul(x["c"], 0.5, out=x["b"]))
    assert status == "invalid" and "against fp64 reference (every 39th element)" in message


def test_a_kernel_wrong_in_one_lane_of_each_block_is_invalid(monkeypatch):
    # Right except at one position of every 64-element block: an even stride could step over that lane for
    # ever, the odd one lands on it.
    def add(x):
        torch.add(x["a"], x["b"], out=x["c"])
        x["c"][63::64] = x["a"][63::64]
        return x["c"]

    assert _status(monkeypatch, "add", add)[0] == "invalid"


def test_an_unwritten_tail_is_invalid(monkeypatch):
    def triad(x):
        torch.add(x["b"][:-1000], x["c"][:-1000], alpha=E.SCALAR, out=x["a"][:-1000])
        return x["a"]

    status, message = _status(monkeypatch, "triad", triad)
    assert status == "invalid" and message == "1000 elements not finite: unwritten output or overflow"


def test_a_dot_that_reads_the_wrong_array_is_invalid(monkeypatch):
    # sum(a·a) against sum(a·b): off by about the size of sum|a·b| itself, whatever the random inputs (a
    # kernel that drops a few thousand products can miss by less than the tolerance when they nearly cancel).
    status, message = _status(monkeypatch, "dot", lambda x: torch.dot(x["a"], x["a"]))
    assert status == "invalid" and "relative error" in message


def test_half_precision_fill_does_not_read_as_overflow(monkeypatch):
    # fp16's sum of 10M × 0.375 overflows to inf; the elements themselves are finite.
    assert _status(monkeypatch, "fill", E._torch_run("fill"), dtype="fp16") == ("ok", "")
