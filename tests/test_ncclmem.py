"""gpubench/ranks/ncclmem.py: finding the NCCL library a process's communicators live in, and its refusals."""

from __future__ import annotations

import ctypes
import ctypes.util
import shutil

import _ctypes
import pytest
import torch

from gpubench.ranks import ncclmem
from gpubench.errors import UsageError


def _maps(tmp_path, *paths):
    lines = [f"7f0000000000-7f0000001000 r-xp 00000000 08:01 {i} {p}" for i, p in enumerate(paths, 1)]
    f = tmp_path / "maps"
    f.write_text("\n".join(["7f0000000000-7f0000001000 rw-p 00000000 00:00 0", *lines]) + "\n")
    return str(f)


def test_the_library_is_the_loaded_one_not_a_plugin(tmp_path):
    # The net plugin (libnccl-net.so) is NCCL's too, but has none of its calls; a library mapped twice is one.
    maps = _maps(tmp_path, "/opt/x/libnccl-net.so", "/opt/v/nvidia/nccl/lib/libnccl.so.2",
                 "/opt/v/nvidia/nccl/lib/libnccl.so.2", "/opt/rocm/lib/librccl.so.1.0")
    assert ncclmem._loaded(maps) == ["/opt/v/nvidia/nccl/lib/libnccl.so.2", "/opt/rocm/lib/librccl.so.1.0"]
    assert ncclmem._loaded(str(tmp_path / "absent")) == []


def test_no_library_or_an_old_one_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    with pytest.raises(UsageError, match="found no NCCL/RCCL library"):
        ncclmem.library(_maps(tmp_path))
    # A shared object without ncclMemAlloc and the rest (an NCCL before 2.19 has none of them) is named.
    old = tmp_path / "libnccl.so.2"
    shutil.copy(_ctypes.__file__, old)
    with pytest.raises(UsageError, match=r"libnccl.so.2 has no ncclMemAlloc, ncclMemFree, .*2\.19"):
        ncclmem.library(_maps(tmp_path, str(old)))


def test_a_buffer_is_a_view_of_the_allocation(tmp_path):
    buf = ctypes.create_string_buffer(64)
    t = ncclmem.tensor_at(ctypes.addressof(buf), 64, "cpu").view(torch.float32)
    t.fill_(1.5)
    assert t.numel() == 16 and t.data_ptr() == ctypes.addressof(buf)
    assert torch.frombuffer(bytearray(buf.raw), dtype=torch.float32).eq(1.5).all()


def test_a_failed_registration_frees_its_chunk_and_names_the_call():
    calls = []

    class Lib:
        def ncclMemAlloc(self, ref, n):
            self.buf = ctypes.create_string_buffer(int(n))
            ref._obj.value = ctypes.addressof(self.buf)
            return 0

        def ncclCommRegister(self, comm, ptr, n, ref):
            return 3  # ncclInternalError

        def ncclMemFree(self, ptr):
            calls.append("free")
            return 0

        def ncclGetErrorString(self, result):
            return b"internal error"

    pool = ncclmem.Pool(Lib(), 7)
    with pytest.raises(RuntimeError, match=r"ncclCommRegister\(67108864\) failed: internal error"):
        pool.empty(4, torch.int32, "cpu")
    assert calls == ["free"] and pool.chunks == []


def test_the_communicator_is_asked_for_with_a_torch_device():
    # The backends name their device as a string ("cuda:0"); torch's _get_backend takes a torch.device only
    # (on an H200 the string made every --register case an error row).
    seen = []

    class Nccl:
        def _comm_ptr(self):
            return 0xC0FFEE

    class Group:
        def __init__(self, backend):
            self.backend = backend

        def _get_backend(self, device):
            assert isinstance(device, torch.device), type(device)
            seen.append(device)
            return self.backend

    assert ncclmem.comm_of(Group(Nccl()), "cuda:0") == 0xC0FFEE and seen == [torch.device("cuda:0")]
    with pytest.raises(UsageError, match="drop --register"):
        ncclmem.comm_of(Group(object()), "cuda:0")


def test_buffers_are_carved_from_chunks_and_a_large_one_has_its_own(monkeypatch):
    # Small buffers share a chunk (4 KiB apart at least, never overlapping); one of a chunk or more gets an
    # allocation of its own and starts at its head, as nccl-tests' buffer does; each chunk is registered once.
    monkeypatch.setattr(ncclmem, "CHUNK_BYTES", 1 << 16)
    chunks, registered, freed, synced = [], [], [], []

    class Lib:
        def ncclMemAlloc(self, ref, n):
            chunks.append(ctypes.create_string_buffer(int(n)))
            ref._obj.value = ctypes.addressof(chunks[-1])
            return 0

        def ncclCommRegister(self, comm, ptr, n, ref):
            registered.append((ptr.value, int(n)))
            ref._obj.value = len(registered)
            return 0

        def ncclMemFree(self, ptr):
            freed.append(ptr.value)
            return 0

    pool = ncclmem.Pool(Lib(), 7, sync=lambda: synced.append(1))
    with pool.lent():
        small = [pool.empty(100, torch.float32, "cpu") for _ in range(3)]
        big = pool.empty(1 << 15, torch.float32, "cpu")  # 128 KiB: two chunks' worth
        after = pool.empty(10, torch.bfloat16, "cpu")
        heads = [ctypes.addressof(c) for c in chunks]
        assert [len(c) for c in chunks] == [1 << 16, 1 << 17]
        assert [t.data_ptr() - heads[0] for t in small] == [0, 4096, 8192]
        assert big.data_ptr() == heads[1] and after.data_ptr() == heads[0] + 12288 and after.dtype == torch.bfloat16
        for i, t in enumerate(small):
            t.fill_(i)
        assert [t.unique().tolist() for t in small] == [[0.0], [1.0], [2.0]]  # no buffer overlaps another
    assert registered == [(h, len(c)) for h, c in zip(heads, chunks)] and synced == [1]
    # The next case gets the same memory, from the same heads: nothing is freed or registered again while the run
    # lasts (a freed chunk came back at its old address, where NCCL's registration cache still pointed its peers
    # at the freed memory). A buffer too large for any chunk gets one more, at its own head.
    with pool.lent():
        again = pool.empty(1 << 15, torch.float32, "cpu")
        first = pool.empty(100, torch.float32, "cpu")
        larger = pool.empty(1 << 16, torch.float32, "cpu")  # 256 KiB
    assert (again.data_ptr(), first.data_ptr()) == (heads[1], heads[0])
    assert len(chunks) == 3 and larger.data_ptr() == ctypes.addressof(chunks[2]) and not freed
    assert len(registered) == 3
