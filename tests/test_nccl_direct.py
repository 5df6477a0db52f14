"""comm --graph's direct NCCL calls (gpubench.dist.nccl_direct), against a recording stand-in for CuPy's binding:
the right NCCL call per collective, with NCCL's counts and the buffers' addresses, and one path for all ranks."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from gpubench.dist import nccl_direct
from gpubench.dist.nccl_direct import DTYPES, OPS, Direct


class Recorder:
    def __init__(self, log):
        self.log = log

    def __getattr__(self, name):
        return lambda *args: self.log.append((name, *args))


def _direct(rank=0, world=2):
    log = []
    nccl = types.SimpleNamespace(groupStart=lambda: log.append(("groupStart",)),
                                 groupEnd=lambda: log.append(("groupEnd",)))
    return Direct(nccl, Recorder(log), rank, world), log


def test_enum_values_are_ncclh():
    # nccl.h: ncclInt32=2, ncclFloat16=6, ncclFloat32=7, ncclFloat64=8, ncclBfloat16=9; sum, prod, max, min, avg.
    assert DTYPES == {"int32": 2, "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9}
    assert OPS == {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}


def test_reducing_and_rooted_calls_carry_counts_ops_and_root():
    d, log = _direct()
    x = torch.ones(8, dtype=torch.float32)
    d.call("all_reduce", x, x, "max", 5)
    d.call("broadcast", x, x, "sum", 5)
    d.call("reduce", x, x, "avg", 5)
    p = x.data_ptr()
    assert log == [("allReduce", p, p, 8, 7, 2, 5), ("broadcast", p, p, 8, 7, 0, 5), ("reduce", p, p, 8, 7, 4, 0, 5)]


def test_gather_and_scatter_counts_are_per_rank_and_in_place_offsets_hold():
    d, log = _direct(rank=1, world=2)
    whole = torch.zeros(8, dtype=torch.bfloat16)
    mine = whole.narrow(0, 4, 4)  # comm's in-place all_gather input: this rank's block of the output
    d.call("all_gather", mine, whole, "sum", 3)
    d.call("reduce_scatter", whole, mine, "sum", 3)
    assert log[0] == ("allGather", whole.data_ptr() + 4 * 2, whole.data_ptr(), 4, 9, 3)
    assert log[1] == ("reduceScatter", whole.data_ptr(), whole.data_ptr() + 8, 4, 9, 0, 3)


def test_alltoall_and_sendrecv_are_grouped_sends_and_receives():
    d, log = _direct(rank=2, world=3)
    s, r = torch.zeros(6, dtype=torch.float64), torch.zeros(6, dtype=torch.float64)
    d.call("alltoall", s, r, "sum", 1)
    sp, rp = s.data_ptr(), r.data_ptr()
    assert log == [("groupStart",),
                   ("send", sp, 2, 8, 0, 1), ("recv", rp, 2, 8, 0, 1),
                   ("send", sp + 16, 2, 8, 1, 1), ("recv", rp + 16, 2, 8, 1, 1),
                   ("send", sp + 32, 2, 8, 2, 1), ("recv", rp + 32, 2, 8, 2, 1),
                   ("groupEnd",)]
    log.clear()
    d.call("sendrecv", s, r, "sum", 1)
    assert log == [("groupStart",), ("send", sp, 6, 8, 0, 1), ("recv", rp, 6, 8, 1, 1), ("groupEnd",)]
    with pytest.raises(ValueError):
        d.call("gather", s, r, "sum", 1)


class Group:
    def __init__(self, rank, have):
        self.rank, self.world_size, self.have = rank, len(have), have
        self.asked = []

    def gather_objects(self, obj):
        self.asked.append(obj)
        if isinstance(obj, bool):
            return list(self.have)
        return [("id",)] + [None] * (self.world_size - 1)  # rank 0's unique id, as every rank receives it


def test_every_rank_takes_torchs_path_when_any_rank_lacks_cupy_nccl(monkeypatch):
    monkeypatch.setattr(nccl_direct, "_module", lambda: types.SimpleNamespace(get_unique_id=lambda: ("id",)))
    assert Direct.open(Group(0, [True, False]), 0) is None
    assert Direct.open(Group(1, [True, False]), 1) is None
    monkeypatch.setattr(nccl_direct, "_module", lambda: None)
    g = Group(0, [False, True])
    assert Direct.open(g, 0) is None and g.asked == [False]


def test_open_makes_one_communicator_from_rank_0s_id(monkeypatch):
    made = []

    class Comm:
        def __init__(self, world, uid, rank):
            made.append((world, uid, rank))

    fake = types.SimpleNamespace(get_unique_id=lambda: ("id",), NcclCommunicator=Comm)
    monkeypatch.setattr(nccl_direct, "_module", lambda: fake)

    class Device:
        def __init__(self, index):
            made.append(("device", index))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=types.SimpleNamespace(Device=Device)))
    d = Direct.open(Group(1, [True, True]), 1)
    assert d is not None and d.rank == 1 and d.world == 2
    assert made == [("device", 1), (2, ("id",), 1)]
