"""Kernel-shape experiment for the Triton stream kernels (how the defaults in
gpubench/kernels/stream_triton.py were chosen): flat vs persistent grid, with and without streaming cache
hints, timed through gpubench's engine at 1 GiB fp32/bf16 arrays against torch.

    python tests/gpu/sweep_stream_variants.py                 # flat, persistent, hinted shapes
    python tests/gpu/sweep_stream_variants.py --per-thread 16 --repeat 2   # flat only, 16 B per thread,
                                                              # 128/256/512 threads, each timed twice
"""

from __future__ import annotations

import itertools

import torch
import triton
import triton.language as tl

from gpubench import engine
from gpubench.backends import open_backend
from gpubench.suite import Workload

SIZE = 1 << 30
S = 0.375


@triton.jit
def copy_flat(src, dst, n, BLOCK: tl.constexpr, HINT: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    if HINT:
        tl.store(dst + offs, tl.load(src + offs, mask=m, eviction_policy="evict_first"), mask=m, cache_modifier=".cs")
    else:
        tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)


@triton.jit
def copy_pers(src, dst, n, BLOCK: tl.constexpr, HINT: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    step = tl.num_programs(0).to(tl.int64) * BLOCK
    for start in range(pid * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        m = offs < n
        if HINT:
            tl.store(dst + offs, tl.load(src + offs, mask=m, eviction_policy="evict_first"), mask=m, cache_modifier=".cs")
        else:
            tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)


@triton.jit
def triad_flat(b, c, a, s, n, BLOCK: tl.constexpr, HINT: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    if HINT:
        x = tl.load(b + offs, mask=m, eviction_policy="evict_first").to(tl.float32)
        y = tl.load(c + offs, mask=m, eviction_policy="evict_first").to(tl.float32)
        tl.store(a + offs, (x + s * y).to(a.dtype.element_ty), mask=m, cache_modifier=".cs")
    else:
        x = tl.load(b + offs, mask=m).to(tl.float32)
        y = tl.load(c + offs, mask=m).to(tl.float32)
        tl.store(a + offs, (x + s * y).to(a.dtype.element_ty), mask=m)


@triton.jit
def triad_pers(b, c, a, s, n, BLOCK: tl.constexpr, HINT: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    step = tl.num_programs(0).to(tl.int64) * BLOCK
    for start in range(pid * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        m = offs < n
        if HINT:
            x = tl.load(b + offs, mask=m, eviction_policy="evict_first").to(tl.float32)
            y = tl.load(c + offs, mask=m, eviction_policy="evict_first").to(tl.float32)
            tl.store(a + offs, (x + s * y).to(a.dtype.element_ty), mask=m, cache_modifier=".cs")
        else:
            x = tl.load(b + offs, mask=m).to(tl.float32)
            y = tl.load(c + offs, mask=m).to(tl.float32)
            tl.store(a + offs, (x + s * y).to(a.dtype.element_ty), mask=m)


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--per-thread", type=int, default=0, help="bytes per thread: flat shapes of 128/256/512 threads")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    backend = open_backend("cuda", 0)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    cfg = engine.EngineConfig(min_samples=10, budget_s=0.5, min_warmup_s=0.1)
    for dtype in (torch.float32, torch.bfloat16):
        n = SIZE // dtype.itemsize

        def make():
            return [torch.empty(n, dtype=dtype, device="cuda").uniform_(-1, 1) for _ in range(3)]

        variants = {
            "torch": (lambda x: x[1].copy_(x[0]), lambda x: torch.add(x[0], x[1], alpha=S, out=x[2])),
        }
        if args.per_thread:
            shapes = [(args.per_thread // dtype.itemsize * 32 * w, w, False) for w in (4, 8, 16)]
        else:
            shapes = list(itertools.product((2048, 4096, 8192), (4, 8, 16), (False, True)))
        for block, warps, hint in shapes:
            g = (triton.cdiv(n, block),)
            variants[f"flat {block}/{warps}{' hint' if hint else ''}"] = (
                lambda x, g=g, b=block, w=warps, h=hint: copy_flat[g](x[0], x[1], n, BLOCK=b, HINT=h, num_warps=w),
                lambda x, g=g, b=block, w=warps, h=hint: triad_flat[g](x[0], x[1], x[2], S, n, BLOCK=b, HINT=h, num_warps=w),
            )
        persistent = [] if args.per_thread else itertools.product((4096, 8192), (8, 16), (2, 4, 8), (False, True))
        for block, warps, per_sm, hint in persistent:
            g = (sms * per_sm,)
            variants[f"pers {block}/{warps} x{per_sm}{' hint' if hint else ''}"] = (
                lambda x, g=g, b=block, w=warps, h=hint: copy_pers[g](x[0], x[1], n, BLOCK=b, HINT=h, num_warps=w),
                lambda x, g=g, b=block, w=warps, h=hint: triad_pers[g](x[0], x[1], x[2], S, n, BLOCK=b, HINT=h, num_warps=w),
            )
        rows = []
        for name, (cp, tr) in [item for _ in range(args.repeat) for item in variants.items()]:
            bw = []
            for fn, words in ((cp, 2), (tr, 3)):
                m = engine.measure(Workload(run=fn, make_inputs=make, bytes=words * SIZE), backend, cfg)
                bw.append(words * SIZE / sorted(m.samples_s)[len(m.samples_s) // 2] / 1e9)
            rows.append((name, *bw))
            print(f"{str(dtype):15s} {name:28s} copy {bw[0]:7.1f} triad {bw[1]:7.1f}", flush=True)
        best_c = max(rows[1:], key=lambda r: r[1])
        best_t = max(rows[1:], key=lambda r: r[2])
        print(f"BEST {dtype}: torch copy {rows[0][1]:.1f} triad {rows[0][2]:.1f}; copy {best_c}; triad {best_t}")


if __name__ == "__main__":
    main()
