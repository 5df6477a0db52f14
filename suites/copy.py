"""``copy``: host↔device and GPU↔GPU copies, by host memory kind and size.

Directions (``direction``; ``src`` and ``dst`` name the ends, ``host`` or ``gpuN``):

- ``h2d`` / ``d2h``: one copy between a host buffer and this GPU's memory;
- ``bidir``: an H2D and a D2H of the same size at once, on two streams;
- ``d2d``: between two buffers in this GPU's memory (``cudaMemcpyAsync``, the copy engine path);
- ``peer``: between this GPU and each other GPU, both ways, issued on this GPU's stream — so ``gpu0→gpu1``
  is a *write* (this GPU pushes) and ``gpu1→gpu0`` a *read* (it pulls), nvbandwidth's write/read CE cases.
  Run once per ``--device`` for the whole matrix on more than two GPUs.

Host memory (``memory``): ``pinned`` (``cudaHostAlloc`` through torch), ``pageable`` (plain ``malloc``), and
``registered`` (a pageable buffer page-locked in place with ``cudaHostRegister``/``hipHostRegister``).

Bytes are counted **once per copy** (nvbandwidth's convention): a 1 GiB H2D moves 1 GiB; ``bidir`` counts
both directions (2 × size); ``d2d`` counts the size once, although the GPU reads and writes it — so the same
traffic reads half of the ``elementwise`` copy figure, which counts read + write as BabelStream does.

Timing: page-locked copies (pinned, registered, d2d, peer) are queued behind a stream hold and timed with
device events, so enqueue cost stays out (nvbandwidth's spin-kernel method). A pageable copy is synchronous
for the host (the driver stages it through its own pinned buffer), so it cannot be queued: it is timed by
the host's clock around copy + synchronize, which is what a caller of ``tensor.to("cuda")`` waits for.

NUMA: host buffers are allocated, and pageable copies issued, from a thread bound to the CPUs of the GPU's
NUMA node (nvbandwidth does this with ``nvmlDeviceSetCpuAffinity``) when the host has several; the node of
the GPU and the node the buffer's pages landed on are columns of every row.

Correctness: data are random bytes; each check compares 4096 random positions plus the first and last byte
of every destination with its source.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gpubench.toolkit import (BANDWIDTH, TIME, Backend, Case, Check, GridContext, Method, Skip, Suite, Workload,
                              format_bytes)
from gpubench.toolkit.charts import (MARKERS, STYLES, Chart, Run, bytes_axis, color, fmt_bytes, grid, join, legend,
                                     names, note, save, spread)
from gpubench.toolkit.workloads import too_big, topology

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
SIZES = (4 * KiB, 64 * KiB, MiB, 16 * MiB, 64 * MiB, 256 * MiB, GiB)
QUICK_SIZES = (MiB, GiB)
# --quick copies pageable memory at 256 MiB, not a GiB: through the driver's staging buffers its rate is flat from
# 16 MiB, and a GiB cost much of a quick run for figures a nightly gate cannot judge (docs/measurements.md, copy).
QUICK_PAGEABLE = {GiB: 256 * MiB}
HOST_MEMORY = ("pinned", "pageable", "registered")
_SAMPLE = 4096  # positions compared per destination
_POISON = 0xA5  # destinations start as this byte: a copy that did not happen cannot pass


def _gpu(index: int) -> str:
    return f"gpu{index}"


class Copy(Suite):
    name = "copy"
    version = 1
    backends = frozenset({"cuda", "hip", "cpu", "fake"})
    metrics = (BANDWIDTH, TIME)
    description = "H2D/D2H/bidirectional/D2D/peer copies; pinned, pageable and registered host memory"
    params = ("direction", "memory", "src", "dst", "copy_bytes")
    chart_order = 50

    @classmethod
    def roof(cls, row):
        # d2d has none (it counts its bytes once, though memory is read and written).
        return {"peer": "peer link", "d2d": None}.get(row.get("direction"), "host link")

    @classmethod
    def charts(cls, runs, out):
        return _chart_copies(runs, out) + _chart_peers(runs, out)

    def cases(self, ctx: GridContext):
        sizes = ctx.sizes or (QUICK_SIZES if ctx.quick else SIZES)
        me, host = _gpu(ctx.device_index), "host"
        # Each GPU's k-th peer is the one k + 1 places after it: in a --devices run, where every GPU runs its
        # k-th peer case at once, each GPU then copies to a different one (no GPU takes every other's writes).
        peers = [(ctx.device_index + k) % ctx.device_count for k in range(1, ctx.device_count)]
        for size in sizes:
            # The cases of one host memory kind and size follow each other: they take the same host buffers
            # (_HostPool), which cost far more to make than to copy (a GiB pinned or registered, 64 sets).
            for memory in HOST_MEMORY:
                n = QUICK_PAGEABLE.get(size, size) if memory == "pageable" and ctx.quick and not ctx.sizes else size
                yield Case.of(direction="h2d", memory=memory, src=host, dst=me, copy_bytes=n)
                yield Case.of(direction="d2h", memory=memory, src=me, dst=host, copy_bytes=n)
                if memory == "pinned":
                    # Pageable copies are synchronous for the host: two of them cannot overlap from one thread.
                    yield Case.of(direction="bidir", memory="pinned", src=host, dst=me, copy_bytes=size)
            yield Case.of(direction="d2d", memory="device", src=me, dst=me, copy_bytes=size)
            for p in peers:
                yield Case.of(direction="peer", memory="device", src=me, dst=_gpu(p), copy_bytes=size)
                yield Case.of(direction="peer", memory="device", src=_gpu(p), dst=me, copy_bytes=size)

    def fleet_key(self, case: Case, ctx: GridContext) -> str:
        # gpu<me> is "self" and a peer is named by how many places after this GPU it is, as cases() orders them.
        def rel(end: str) -> str:
            if not end.startswith("gpu"):
                return end
            k = (_index(end) - ctx.device_index) % max(ctx.device_count, 1)
            return "self" if k == 0 else f"peer+{k}"

        return ",".join(f"{k}={rel(v) if k in ('src', 'dst') else v}" for k, v in case.params)

    def per_process(self, case: Case) -> bool:
        # A copy to or from host memory runs at a rate that follows where this process's host buffers landed.
        return case["memory"] in HOST_MEMORY

    def prepare(self, case: Case, backend: Backend, ctx: GridContext | None = None) -> Workload:
        if backend.name == "cpu":
            raise Skip("no GPU: host↔device copies need a GPU (the cpu backend has no device memory)")
        direction, memory, size = case["direction"], case["memory"], case["copy_bytes"]
        on_gpu = backend.name in ("cuda", "hip")
        # Every size except bidir's has one source and one destination of `size` on the device side.
        device_bytes = size * (2 if direction in ("bidir", "d2d") else 1)
        message = too_big(device_bytes, backend, "of device buffers")
        if message:
            raise Skip(message)
        me = backend.device_index
        gpu_numa = topology.pci_numa_node(backend.pci_bus_id())
        extra: dict[str, Any] = {"gpu_numa": gpu_numa, "host_numa": None, "numa_bound": False,
                                 "peer_access": None, "link": None,
                                 # The roof a figure is held against (gpubench check's spec fallback)
                                 "roof": self.roof(case.as_dict())}

        if direction == "peer":
            src_dev, dst_dev = _index(case["src"]), _index(case["dst"])
            peer = dst_dev if src_dev == me else src_dev
            extra["issued_on"] = "write" if src_dev == me else "read"
            extra["peer_access"], extra["link"] = _peer_facts(backend, me, peer, on_gpu)
            copy_fn = _peer_copy(on_gpu, src_dev, dst_dev)
        else:
            copy_fn = _bidir_copy(on_gpu) if direction == "bidir" else _one_copy
        pageable = memory == "pageable"
        extra["timing_method"] = "host clock, copy + sync" if pageable else "held stream, events"

        pool = _HostPool.of(ctx, memory, size, on_gpu)

        def make_inputs() -> Buffers:
            with topology.bind_to_node(gpu_numa) as binding:
                bufs = _make_buffers(direction, pool, size, backend, on_gpu, case)
            if extra["host_numa"] is None and bufs.host is not None:
                extra["host_numa"] = topology.address_numa_node(bufs.host.data_ptr(), size)
            extra["numa_bound"] = binding.bound
            return bufs

        if pageable:
            def run(b: Buffers) -> None:
                copy_fn(b)
                backend.synchronize()  # the copy is done when the caller gets its data
        else:
            run = copy_fn

        return Workload(
            run=run,
            make_inputs=make_inputs,
            bytes=size * (2 if direction == "bidir" else 1),
            check=_check,
            footprint=device_bytes,
            extra=extra,  # the same dict make_inputs fills in: host_numa and numa_bound are known only then
            method=Method(
                timing="host" if pageable else "device",
                hold=not pageable,
                # The host thread stages pageable copies itself: it runs on the GPU's node while they are timed.
                context=(lambda: topology.bind_to_node(gpu_numa)) if pageable else None,
            ),
        )


def _index(name: str) -> int:
    return int(name.removeprefix("gpu"))


@dataclass
class Buffers:
    """One input set: (source, destination) pairs copied by one call, and the host buffer (for NUMA)."""

    pairs: list[tuple[torch.Tensor, torch.Tensor]]
    host: torch.Tensor | None = None


def _one_copy(b: Buffers) -> None:
    src, dst = b.pairs[0]
    dst.copy_(src, non_blocking=True)


def _bidir_copy(on_gpu: bool):
    if not on_gpu:
        return lambda b: [dst.copy_(src) for src, dst in b.pairs]
    side = torch.cuda.Stream()

    def run(b: Buffers) -> None:
        (h2d_src, h2d_dst), (d2h_src, d2h_dst) = b.pairs
        main = torch.cuda.current_stream()
        side.wait_stream(main)  # starts together with the main stream's copy (and behind its hold)
        with torch.cuda.stream(side):
            d2h_dst.copy_(d2h_src, non_blocking=True)
        h2d_dst.copy_(h2d_src, non_blocking=True)
        main.wait_stream(side)  # the end event waits for both directions

    return run


def _peer_copy(on_gpu: bool, src_dev: int, dst_dev: int):
    if not on_gpu:
        return _one_copy
    try:
        import cupy
    except ImportError as e:
        raise Skip(f"peer copies go through CuPy's runtime bindings; install cupy ({e})") from e
    rt = cupy.cuda.runtime

    def run(b: Buffers) -> None:
        src, dst = b.pairs[0]
        # On this GPU's current stream whichever end it is (write or read), unlike torch's copy_, which
        # always issues on the source device and adds a cross-device barrier per copy.
        rt.memcpyPeerAsync(dst.data_ptr(), dst_dev, src.data_ptr(), src_dev, src.numel(),
                           torch.cuda.current_stream().cuda_stream)

    return run


def _peer_facts(backend: Backend, me: int, peer: int, on_gpu: bool) -> tuple[bool | None, str | None]:
    """(peer access enabled, link) — enabling it first, as a framework would, so copies go direct."""
    if not on_gpu:
        return None, None
    if not torch.cuda.can_device_access_peer(me, peer):
        return False, topology.gpu_link(backend.name, backend.pci_bus_id(me), backend.pci_bus_id(peer))
    import cupy

    for a, b in ((me, peer), (peer, me)):
        with cupy.cuda.Device(a):
            try:
                cupy.cuda.runtime.deviceEnablePeerAccess(b)
            except cupy.cuda.runtime.CUDARuntimeError as e:
                if "AlreadyEnabled" not in str(e):
                    raise
    return True, topology.gpu_link(backend.name, backend.pci_bus_id(me), backend.pci_bus_id(peer))


def _make_buffers(direction: str, pool: _HostPool, size: int, backend: Backend, on_gpu: bool, case: Case) -> Buffers:
    dev = backend.torch_device

    def device(where: str) -> torch.Tensor:
        return torch.empty(size, dtype=torch.uint8, device=f"cuda:{_index(where)}" if on_gpu else dev)

    hosts: list[torch.Tensor] = []

    def host() -> torch.Tensor:
        hosts.append(pool.take())
        return hosts[-1]

    if direction == "h2d":
        pairs = [(host(), device(case["dst"]))]
    elif direction == "d2h":
        pairs = [(device(case["src"]), host())]
    elif direction == "bidir":
        pairs = [(host(), device(case["dst"])), (device(case["dst"]), host())]
    else:  # d2d, peer
        pairs = [(device(case["src"]), device(case["dst"]))]
    for src, dst in pairs:
        _randomize(src, dev)
        dst.fill_(_POISON)
    made = Buffers(pairs, hosts[0] if hosts else None)
    pool.lend(made)
    return made


def _randomize(t: torch.Tensor, dev: str) -> None:
    # Random bytes made on the device and copied over: generating a GiB on the host takes seconds.
    t.copy_(torch.randint(0, 256, t.shape, dtype=torch.uint8, device=dev if t.device.type == "cpu" else t.device))


def _check(b: Buffers, _out: object) -> Check:
    bad = 0
    for src, dst in b.pairs:
        n = src.numel()
        idx = torch.cat([torch.randint(0, n, (min(n, _SAMPLE),)), torch.tensor([0, n - 1])])
        got = dst[idx.to(dst.device)].cpu()
        want = src[idx.to(src.device)].cpu()
        bad += int((got != want).sum())
    return Check(bad == 0, float(bad), 0.0, "" if bad == 0 else f"{bad} sampled bytes differ from the source")


class _HostPool:
    """The host buffers of the copy cases of one memory kind and size, made once and handed out again.

    Making a GiB of pinned or registered host memory, or touching a GiB of pageable memory for the first time,
    takes longer than timing copies of it, and a case at 1 MiB takes 64 rotating sets: fresh buffers per case
    were much of a quick copy run's time (docs/measurements.md, copy; and these cases are measured in three
    processes). A set being made takes buffers that no live set has, so two sets alive at once never share
    one, and a set the engine has let go (the check's, before the rotating sets) gives its buffers to the next;
    the next case of the same kind and size takes the same buffers again, and the first case of another kind
    or size lets them go (a set whose making failed leaves its buffers taken: never handed out again). Each
    case fills its sets afresh (sources random, destinations poisoned), so what a case checks is its own copy.
    Held in the suite's context for the run (``GridContext.state``): nothing outlives the suite's run.
    """

    def __init__(self, memory: str, size: int, on_gpu: bool):
        self.key = (memory, size, on_gpu)
        self.held: list[torch.Tensor] = []
        # Per buffer, who has it: None (nobody), _MAKING (a set being made) or a weak reference to the set,
        # dead once the engine lets the set go (it drops the check's set before it makes the rotating ones).
        self.owners: list[Any] = []
        self.chunks: list[_Registered] = []  # what keeps registered buffers locked (and unlocks them when dropped)

    @classmethod
    def of(cls, ctx: GridContext | None, memory: str, size: int, on_gpu: bool) -> _HostPool:
        """The pool for a new case: the one in ``ctx`` where it holds this kind and size, else a new one there."""
        pool = ctx.state.get("copy_host_pool") if ctx is not None else None
        if pool is None or pool.key != (memory, size, on_gpu):
            pool = cls(memory, size, on_gpu)  # the old one, and its buffers, go with the last reference
            if ctx is not None:
                ctx.state["copy_host_pool"] = pool
        return pool

    def take(self) -> torch.Tensor:
        """A buffer no live set has (made if there is none), for the set being made."""
        i = self._free()
        if i is None:
            self._grow()
            self.owners.extend([None] * (len(self.held) - len(self.owners)))
            i = self._free()
        self.owners[i] = _MAKING
        return self.held[i]

    def _free(self) -> int | None:
        return next((i for i, owner in enumerate(self.owners)
                     if owner is None or (owner is not _MAKING and owner() is None)), None)

    def lend(self, made: Buffers) -> None:
        """The buffers taken for ``made`` are its own until it is gone."""
        for i, owner in enumerate(self.owners):
            if owner is _MAKING:
                self.owners[i] = weakref.ref(made)

    def _grow(self) -> None:
        memory, size, on_gpu = self.key
        if not on_gpu:
            self.held.append(torch.empty(size, dtype=torch.uint8))  # the fake backend: bookkeeping only
        elif memory == "pinned":
            self.held.append(torch.empty(size, dtype=torch.uint8, pin_memory=True))
        elif memory == "registered":
            # One registration for up to 64 MiB of small buffers: a cudaHostRegister call costs ~11 ms whatever the
            # size (docs/measurements.md, copy), and a buffer inside a locked range is as locked as the whole range.
            count = max(1, min(64, _REGISTER_CHUNK // size))
            chunk = _Registered(count * size)
            self.chunks.append(chunk)
            self.held.extend(chunk.tensor[i * size : (i + 1) * size] for i in range(count))
        elif memory == "device":
            raise AssertionError("device-to-device cases take no host buffers")
        else:
            self.held.append(torch.empty(size, dtype=torch.uint8))


_REGISTER_CHUNK = 64 << 20
_MAKING = object()


class _Registered:
    """A pageable buffer page-locked in place (``cudaHostRegister``), unlocked before it is freed.

    The registered range must own its pages — two registrations of one page fail — so the tensor is a
    page-aligned view into a larger allocation, and the whole pages under it are registered.
    """

    def __init__(self, size: int):
        import mmap

        page = mmap.PAGESIZE
        span = -(-size // page) * page
        self._raw = torch.empty(span + page, dtype=torch.uint8)
        offset = -self._raw.data_ptr() % page
        self.tensor = self._raw[offset : offset + size]
        self._ptr = self._raw.data_ptr() + offset
        rc = torch.cuda.cudart().cudaHostRegister(self._ptr, span, 0)
        if int(getattr(rc, "value", rc)) != 0:
            raise RuntimeError(f"cudaHostRegister of {format_bytes(span)} failed: {rc}")

    def __del__(self):
        try:
            torch.cuda.cudart().cudaHostUnregister(self._ptr)
        except Exception:  # noqa: BLE001 — at interpreter exit the runtime may be gone; the OS frees it anyway
            pass


# --- the report's charts --------------------------------------------------------------------------------------------
_DIRECTIONS = {"h2d": "host → device", "d2h": "device → host", "bidir": "bidirectional (h2d + d2h at once)",
               "d2d": "device → device (same GPU)"}
_MEMORY_COLORS = {"pinned": "tab:blue", "pageable": "tab:orange", "registered": "tab:green", "device": "tab:purple"}


def _chart_copies(runs: list[Run], out: Path) -> list[Chart]:
    title = "copy: bandwidth vs size per direction"
    have = [(i, r, r.ok("copy", "bandwidth")) for i, r in enumerate(runs)]
    have = [(i, r, rows[rows["direction"] != "peer"]) for i, r, rows in have if len(rows)]
    have = [(i, r, rows) for i, r, rows in have if len(rows)]
    if not have:
        if any(r.has("copy") and not len(r.ok("copy", "bandwidth")) for r in runs):
            return [note("copy", title, "no ok host↔device copy rows (the cpu backend skips them: no device memory)")]
        return []
    directions = [d for d in _DIRECTIONS if any((rows["direction"] == d).any() for *_, rows in have)]
    fig, axes = grid(len(directions), cols=2, w=6.4, h=4.2)
    for ax, d in zip(axes, directions):
        sizes = set()
        here = [(i, r, rows[rows["direction"] == d]) for i, r, rows in have if (rows["direction"] == d).any()]
        name = names([r for _, r, _ in here])
        for i, r, rows in here:
            for k, mem in enumerate(sorted(rows["memory"].astype(str).unique())):
                sel = rows[rows["memory"] == mem].sort_values("copy_bytes")
                sizes.update(sel["copy_bytes"])
                # One run: a colour per memory kind, pinned vs pageable being the point of the chart.
                c = color(i) if len(here) > 1 else _MEMORY_COLORS.get(mem, "tab:gray")
                ax.errorbar(sel["copy_bytes"], sel["value"], yerr=spread(sel), capsize=2, color=c,
                            ls=STYLES[k % len(STYLES)], marker=MARKERS[k % len(MARKERS)], ms=4,
                            label=join(name[id(r)], mem))
        bytes_axis(ax, sizes)
        ax.set_xlabel("copy size (bytes, counted once)")
        ax.set_ylabel("bandwidth (GB/s)")
        ax.set_ylim(bottom=0)
        ax.set_title(_DIRECTIONS[d])
        ax.grid(True, which="both", alpha=0.3)
        legend(ax, loc="upper left")
    fig.suptitle(title + ": pinned vs pageable vs registered host memory (error bars: interquartile range)")
    return [Chart("copy", title, save(fig, out, "copy.png"))]


def _chart_peers(runs: list[Run], out: Path) -> list[Chart]:
    title = "copy: GPU ↔ GPU bandwidth matrix"
    have = []
    for i, r in enumerate(runs):
        rows = r.ok("copy", "bandwidth")
        rows = rows[rows["direction"].isin(["peer", "d2d"])] if len(rows) else rows
        if len(rows) and (rows["direction"] == "peer").any():
            have.append((r, rows[rows["copy_bytes"] == rows.loc[rows["direction"] == "peer", "copy_bytes"].max()]))
    if not have:
        return []
    fig, axes = grid(len(have), cols=2, w=5.6, h=4.6)
    for ax, (r, rows) in zip(axes, have):
        gpus = sorted(set(rows["src"]) | set(rows["dst"]), key=lambda g: (len(g), g))
        m = np.full((len(gpus), len(gpus)), np.nan)
        for row in rows.itertuples(index=False):
            m[gpus.index(row.src), gpus.index(row.dst)] = row.value
        # The diagonal (d2d, within one GPU's memory) is several times any link: colouring it would wash out
        # the peer cells, so it is printed on grey and the colour scale is the peers' alone.
        off = ~np.eye(len(gpus), dtype=bool)
        peers = np.where(off, m, np.nan)
        im = ax.imshow(peers, cmap="viridis", vmin=0, vmax=np.nanmax(peers))
        ax.imshow(np.where(off, np.nan, 1.0), cmap="Greys", vmin=0, vmax=5)
        for (a, b), v in np.ndenumerate(m):
            dark = off[a, b] and v < np.nanmax(peers) * 0.6
            text = "—" if v != v else (f"{v:.0f}" if off[a, b] else f"d2d\n{v:.0f}")
            ax.text(b, a, text, ha="center", va="center", color="white" if dark else "black", fontsize=9)
        ax.set_xticks(range(len(gpus)), gpus)
        ax.set_yticks(range(len(gpus)), gpus)
        ax.set_xlabel("destination")
        ax.set_ylabel("source")
        size = fmt_bytes(float(rows["copy_bytes"].iloc[0]))
        ax.set_title(f"{r.label}: {size}iB copies, GB/s (— : not measured)", fontsize=9)
        fig.colorbar(im, ax=ax, label="GB/s")
    return [Chart("copy", title, save(fig, out, "copy-peer.png"))]
