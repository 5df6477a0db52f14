"""A tiled Triton matmul, C = A @ B (× scale_a·scale_b for fp8), in the shape of Triton's matmul tutorial.

Each program computes one BLOCK_M × BLOCK_N tile of C, walking K in BLOCK_K steps and accumulating in fp32.
Programs are ordered in groups of GROUP_M tile rows ("grouped ordering"): tiles launched together share
rows of A and columns of B, so those stay in L2 instead of being fetched once per tile.

Operands are fp16, bf16, fp32 (``precision`` "ieee" for true fp32 FMA, "tf32" for TF32 tensor cores) or fp8
(e4m3; C in bf16, per-tensor scales applied to the fp32 accumulator). A and B may have any strides, so the
NN and NT layouts are the same kernel. No fp64: ``tl.dot`` of fp64 is not part of this kernel's scope.

Tile shapes are autotuned per (M, N, K, B's strides, dtypes) from the tutorial's list, with BLOCK_K chosen
so that one row of a tile is 128 bytes whatever the element size (64 fp16, 32 fp32, 128 fp8): shared memory
per stage then stays the same across dtypes, and the configs of other element sizes are pruned before
anything compiles. ``config=`` bypasses the autotuner (the tests do, under TRITON_INTERPRET=1).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

ROW_BYTES = 128  # BLOCK_K × element size

# (BLOCK_M, BLOCK_N, num_stages, num_warps): Triton's matmul tutorial list, plus a narrow-M shape for
# decode-like GEMMs where M is 16 or 64.
_SHAPES = (
    (128, 256, 3, 8),
    (256, 128, 3, 8),
    (64, 256, 4, 4),
    (128, 128, 4, 4),
    (128, 64, 4, 4),
    (64, 128, 4, 4),
    (64, 64, 4, 4),
    (16, 128, 4, 4),
)


def _configs() -> list[triton.Config]:
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_stages=s, num_warps=w)
        for bm, bn, s, w in _SHAPES
        for bk in (32, 64, 128)
    ]


def _keep_row_bytes(configs, named_args, **kwargs):
    """Keep the configs whose BLOCK_K spans ROW_BYTES of this call's operand type."""
    size = named_args["a_ptr"].element_size()
    return [c for c in configs if c.kwargs["BLOCK_K"] * size == ROW_BYTES]


@triton.jit
def _matmul_kernel(
    a_ptr, b_ptr, c_ptr, scale_a_ptr, scale_b_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    PRECISION: tl.constexpr, HAS_SCALE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    # Grouped ordering: consecutive programs walk down GROUP_M tile rows before moving one tile column right.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # Rows and columns past the edge wrap around (modulo) instead of being masked: the loads stay in bounds
    # and unmasked, and the store below drops what they computed.
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kk in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - kk * BLOCK_K  # the last step may run past K: those products must be zero
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        if PRECISION == "ieee":
            acc = tl.dot(a, b, acc, input_precision="ieee")
        elif PRECISION == "tf32":
            acc = tl.dot(a, b, acc, input_precision="tf32")
        else:  # fp16, bf16, fp8: the precision knob only means something for fp32 operands
            acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    if HAS_SCALE:
        acc = acc * (tl.load(scale_a_ptr) * tl.load(scale_b_ptr))
    c = acc.to(c_ptr.dtype.element_ty)

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


_autotuned = triton.autotune(
    configs=_configs(),
    key=["M", "N", "K", "stride_bk", "stride_bn"],  # the autotuner adds the operands' dtypes itself
    prune_configs_by={"early_config_prune": _keep_row_bytes},
)(_matmul_kernel)

# Offsets are 32-bit: past this many elements in one operand they would wrap.
_MAX_ELEMENTS = 2**31 - 1


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    *,
    precision: str = "ieee",
    scale_a: torch.Tensor | None = None,
    scale_b: torch.Tensor | None = None,
    config: dict | None = None,
) -> torch.Tensor:
    """Write a @ b (times scale_a·scale_b when given) into c and return c.

    a is (M, K), b is (K, N) — for NT, pass the transposed view of an (N, K) tensor — and c is (M, N).
    ``precision`` ("ieee" or "tf32") matters for fp32 operands only. ``config`` (BLOCK_M, BLOCK_N, BLOCK_K,
    GROUP_M and optionally num_warps, num_stages) runs one tile shape instead of autotuning.
    """
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2 or tuple(c.shape) != (m, n):
        raise ValueError(f"shapes do not chain: a {tuple(a.shape)}, b {tuple(b.shape)}, c {tuple(c.shape)}")
    if max(m * k, k * n, m * n) > _MAX_ELEMENTS:
        raise ValueError(f"an operand of {m}x{n}x{k} has more than 2**31 elements (offsets are 32-bit)")
    if precision not in ("ieee", "tf32"):
        raise ValueError(f"precision must be 'ieee' or 'tf32', not {precision!r}")
    has_scale = scale_a is not None and scale_b is not None
    args = (a, b, c, scale_a if has_scale else c, scale_b if has_scale else c, m, n, k,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    if config is None:
        _autotuned[grid](*args, PRECISION=precision, HAS_SCALE=has_scale)
    else:
        meta = dict(config)
        opts = {key: meta.pop(key) for key in ("num_warps", "num_stages") if key in meta}
        _matmul_kernel[grid](*args, PRECISION=precision, HAS_SCALE=has_scale, **meta, **opts)
    return c


def best_config(a: torch.Tensor, b: torch.Tensor) -> str:
    """The tile shape the autotuner settled on for this problem, as text; "" before it has run."""
    (m, k), n = a.shape, b.shape[1]
    key = (m, n, k, b.stride(0), b.stride(1))
    for cache_key, cfg in _autotuned.cache.items():
        if tuple(cache_key[: len(key)]) == key and str(a.dtype) in map(str, cache_key[len(key):]):
            kw = cfg.kwargs
            return (f"BLOCK={kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']},GROUP_M={kw['GROUP_M']},"
                    f"warps={cfg.num_warps},stages={cfg.num_stages}")
    return ""
