"""Triton matmuls, C = A @ B (× scale_a·scale_b for fp8), in two variants.

``persistent-tma`` (Hopper and newer NVIDIA GPUs, and Triton's interpreter): one program per multiprocessor
walks the output tiles (a persistent grid: no tail of half-empty waves, and the next tile's loads start while
the last one's epilogue drains), A, B and C move through TMA tensor descriptors (``tl.make_tensor_descriptor``,
made once per program on the device: the copy engine fetches whole tiles into shared memory, out-of-bounds
reads come back as zeros and out-of-bounds writes are dropped), and, where the configuration asks, the loop is
warp specialised (producer warps load, consumer warpgroups multiply). This is the shape of the fastest public
Triton GEMMs on Hopper. The descriptors are made on the device, not passed from the host: the launch then
takes plain pointers, which Triton's launcher handles several times faster (host descriptors made the host, not
the GPU, the limit of a 4096³ fp8 product: docs/measurements.md, 'gemm').

``tiled`` (everywhere else: older GPUs, ROCm, strides TMA cannot describe): each program computes one
BLOCK_M × BLOCK_N tile of C with plain ``tl.load``/``tl.dot``, in the shape of Triton's matmul tutorial.

Both walk the tiles in groups of GROUP_M tile rows ("grouped ordering"): tiles in flight together share rows
of A and columns of B, so those stay in L2 instead of being fetched once per tile, and both accumulate in fp32.

Operands are fp16, bf16, fp32 (``precision`` "ieee" for true fp32 FMA, "tf32" for TF32 tensor cores; tiled
only) or fp8 (e4m3; C in bf16, per-tensor scales applied to the fp32 accumulator). A and B may have any strides
in the tiled variant; the TMA variant wants unit stride along one axis of each and 16-byte aligned rows. No
fp64: ``tl.dot`` of fp64 is not part of this kernel's scope.

Launch configurations: ``config=`` forces one (the autotune-kernels sweep and the tests do). Otherwise the
configurations that sweep exported for this GPU (``gpubench export RUN --format triton-configs``; the files in
``configs/`` beside this module, and any named in GPUBENCH_TRITON_CONFIGS) are used: the exported shape
nearest this problem's, same dtype. Without one, the persistent variant runs a per-element-size default and
the tiled variant autotunes over the tutorial's list (BLOCK_K spans 128 bytes of a row whatever the element
size). ``best_config`` says, as text, what a problem ran with.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import torch
import triton
import triton.language as tl

from gpubench.kernels.launch_configs import ROW_BYTES  # BLOCK_K × element size

# triton >= 3.4: device-side tensor descriptors (they need a scratch allocator); older builds run tiled only.
HAS_DESCRIPTORS = hasattr(tl, "make_tensor_descriptor") and hasattr(triton, "set_allocator")

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


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped ordering of a flat tile index: GROUP_M tile rows down, then one tile column right."""
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (tile_id // num_pid_in_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((tile_id % num_pid_in_group) % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _matmul_tma_kernel(
    a_ptr, b_ptr, c_ptr, scale_a_ptr, scale_b_ptr,
    M, N, K, stride_am, stride_b, stride_cm,
    HAS_SCALE: tl.constexpr, B_KMAJOR: tl.constexpr, NUM_SMS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EPILOGUE_SPLIT: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
):
    # stride_b: B's row stride as stored, N×K (layout NT, K-major: the tensor cores take the transposed tile as
    # it lies) or K×N.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K])
    if B_KMAJOR:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_b, 1],
                                           block_shape=[BLOCK_N, BLOCK_K])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_b, 1],
                                           block_shape=[BLOCK_K, BLOCK_N])
    if EPILOGUE_SPLIT:
        c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1],
                                           block_shape=[BLOCK_M, BLOCK_N // 2])
    else:
        c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1],
                                           block_shape=[BLOCK_M, BLOCK_N])
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    # flatten: the tile loop and the K loop become one software pipeline, so the next tile's first loads are
    # issued before this tile's epilogue.
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=True, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(k_tiles):
            off_k = kk * BLOCK_K
            a = a_desc.load([off_m, off_k])  # past K the descriptor reads zeros: no mask needed
            if B_KMAJOR:
                acc = tl.dot(a, b_desc.load([off_n, off_k]).T, acc)
            else:
                acc = tl.dot(a, b_desc.load([off_k, off_n]), acc)
        if HAS_SCALE:
            acc = acc * (tl.load(scale_a_ptr) * tl.load(scale_b_ptr))
        if EPILOGUE_SPLIT:
            # Two half-width stores: half the shared memory for the epilogue, left to deeper pipelining.
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            c0, c1 = tl.split(halves)
            c_desc.store([off_m, off_n], c0.to(c_ptr.dtype.element_ty))
            c_desc.store([off_m, off_n + BLOCK_N // 2], c1.to(c_ptr.dtype.element_ty))
        else:
            c_desc.store([off_m, off_n], acc.to(c_ptr.dtype.element_ty))


_autotuned = triton.autotune(
    configs=_configs(),
    key=["M", "N", "K", "stride_bk", "stride_bn"],  # the autotuner adds the operands' dtypes itself
    prune_configs_by={"early_config_prune": _keep_row_bytes},
)(_matmul_kernel)

# Offsets are 32-bit: past this many elements in one operand they would wrap.
_MAX_ELEMENTS = 2**31 - 1

TILED, PERSISTENT_TMA = "tiled", "persistent-tma"
VARIANTS = (TILED, PERSISTENT_TMA)
# The persistent variant's launch shape where no exported configuration covers the dtype: per element size,
# 128×256 tiles, BLOCK_K of 128 bytes, 3 stages, 8 warps (two consumer warpgroups).
_TMA_DEFAULT = {"BLOCK_M": 128, "BLOCK_N": 256, "GROUP_M": 8, "num_warps": 8, "num_stages": 3,
                "EPILOGUE_SPLIT": 0, "WARP_SPECIALIZE": 0}
CONFIG_ENV = "GPUBENCH_TRITON_CONFIGS"
CONFIG_DIR = Path(__file__).resolve().parent / "configs"
_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
_INTERPRET_SMS = 3  # the interpreter's "multiprocessors": few, so that each program walks several tiles


_AVAILABLE: dict = {}


def tma_available(device: torch.device | str) -> str:
    """"" where the persistent TMA variant can run on this device (or in the interpreter), else why not."""
    device = torch.device(device)
    if device not in _AVAILABLE:
        _AVAILABLE[device] = _tma_available(device)
    return _AVAILABLE[device]


def _tma_available(device: torch.device) -> str:
    if not HAS_DESCRIPTORS:
        return f"triton {triton.__version__} has no device-side tensor descriptors (triton >= 3.4 has)"
    if not _INTERPRET:
        if device.type != "cuda" or torch.version.hip is not None:
            return "TMA is an NVIDIA feature (this is not a CUDA device)"
        cc = torch.cuda.get_device_capability(device)
        if cc < (9, 0):
            return f"TMA needs compute capability >= 9.0; this GPU is {cc[0]}.{cc[1]}"
    return ""


def tma_possible(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> str:
    """"" where the persistent TMA variant can run this product, else why not."""
    why_not = tma_available(a.device)
    if why_not:
        return why_not
    if a.dtype == torch.float32:
        return "fp32 runs the tiled variant (its precision knob)"
    if a.stride(1) != 1 or c.stride(1) != 1 or not (b.stride(0) == 1 or b.stride(1) == 1):
        return "TMA needs unit stride along one axis of each operand"
    if a.element_size() == 1 and b.stride(0) != 1:
        return "fp8 tensor cores want B K-major (layout NT)"
    for t in (a, b, c):
        if t.data_ptr() % 16 or any((s * t.element_size()) % 16 for s in t.stride() if s != 1):
            return "TMA needs 16-byte aligned bases and rows"
    return ""


_SMS: dict = {}


def _num_sms(device: torch.device) -> int:
    if _INTERPRET:
        return _INTERPRET_SMS
    if device.index not in _SMS:
        _SMS[device.index] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SMS[device.index]


def _scratch(size: int, alignment: int, stream) -> torch.Tensor:
    """Global memory in which each program writes its tensor descriptors (Triton asks per launch)."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


_ALLOCATOR = []


def _launch_tma(a, b, c, scale_a, scale_b, has_scale: bool, cfg: dict) -> None:
    if not _ALLOCATOR and not _INTERPRET:
        triton.set_allocator(_scratch)
        _ALLOCATOR.append(_scratch)
    meta = {k: int(v) for k, v in cfg.items() if k != "variant"}
    bm, bn = meta["BLOCK_M"], meta["BLOCK_N"]
    meta["EPILOGUE_SPLIT"] = bool(meta.get("EPILOGUE_SPLIT", 0))
    meta["WARP_SPECIALIZE"] = bool(meta.get("WARP_SPECIALIZE", 0))
    (m, k), n = a.shape, b.shape[1]
    kmajor = b.stride(0) == 1
    sms = _num_sms(a.device)
    grid = (max(1, min(sms, triton.cdiv(m, bm) * triton.cdiv(n, bn))),)
    _matmul_tma_kernel[grid](a, b, c, scale_a, scale_b, m, n, k, a.stride(0), b.stride(1) if kmajor else b.stride(0),
                             c.stride(0), HAS_SCALE=has_scale, B_KMAJOR=kmajor, NUM_SMS=sms, **meta)


# --- exported configurations (gpubench export RUN --format triton-configs) ---------------------------------

_DTYPE_NAME = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}


def dtype_name(t: torch.Tensor) -> str:
    return "fp8" if t.element_size() == 1 else _DTYPE_NAME.get(t.dtype, str(t.dtype))


def device_name(device: torch.device) -> str:
    if _INTERPRET or device.type != "cuda":
        return "interpreter" if _INTERPRET else device.type
    return torch.cuda.get_device_name(device)


def config_files() -> list[Path]:
    """The packaged exports, then those named in GPUBENCH_TRITON_CONFIGS (os.pathsep-separated; later wins)."""
    files = sorted(CONFIG_DIR.glob("*.json")) if CONFIG_DIR.is_dir() else []
    files += [Path(p) for p in os.environ.get(CONFIG_ENV, "").split(os.pathsep) if p]
    return files


_EXPORTS: dict[tuple, dict] = {}


def exported(gpu: str, dtype: str) -> dict[str, dict]:
    """{shape "MxNxK": {"config": {...}, ...}} of the gemm kernel for this GPU and dtype, from every export."""
    key = (gpu, dtype, tuple(config_files()))
    if key not in _EXPORTS:
        found: dict[str, dict] = {}
        for path in key[2]:
            try:
                doc = json.loads(Path(path).read_text())
            except (OSError, ValueError) as e:
                raise ValueError(f"{path}: not a triton-configs export ({e}); rerun gpubench export") from e
            if doc.get("gpu") == gpu:
                for shape, entry in doc.get("kernels", {}).get("gemm", {}).get(dtype, {}).items():
                    found[shape] = {**entry, "source": Path(path).name}
        _EXPORTS[key] = found
    return _EXPORTS[key]


def nearest_export(gpu: str, dtype: str, m: int, n: int, k: int) -> dict | None:
    """The exported entry whose shape is nearest (M, N, K) in log space; None where none was exported."""
    best, dist = None, math.inf
    for shape, entry in exported(gpu, dtype).items():
        em, en, ek = (int(v) for v in shape.split("x"))
        d = sum(abs(math.log2(x / y)) for x, y in ((em, m), (en, n), (ek, k)))
        if d < dist:
            best, dist = {**entry, "shape": shape}, d
    return best


_LAST: dict[tuple, tuple] = {}
_PLANS: dict[tuple, tuple] = {}


def _problem_key(a: torch.Tensor, b: torch.Tensor) -> tuple:
    (m, k), n = a.shape, b.shape[1]
    return (m, n, k, b.stride(0), b.stride(1), str(a.dtype))


def describe(cfg: dict, source: str = "") -> str:
    """A configuration as a reader reruns it: variant=... BLOCK_M=... ... [source=...]."""
    variant = cfg.get("variant", TILED)
    names = [("BLOCK_M", "BLOCK_M"), ("BLOCK_N", "BLOCK_N"), ("BLOCK_K", "BLOCK_K"), ("GROUP_M", "GROUP_M"),
             ("num_stages", "stages"), ("num_warps", "warps")]
    if variant == PERSISTENT_TMA:
        names += [("WARP_SPECIALIZE", "ws"), ("EPILOGUE_SPLIT", "split")]
    parts = [f"variant={variant}"] + [f"{label}={int(cfg[key])}" for key, label in names if key in cfg]
    return " ".join(parts + ([f"source={source}"] if source else []))


def choose(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[dict | None, str]:
    """(configuration, where it came from) for a product without ``config=``; (None, "autotune") where the
    tiled variant's autotuner decides."""
    (m, k), n = a.shape, b.shape[1]
    why_not = tma_possible(a, b, c)
    entry = nearest_export(device_name(a.device), dtype_name(a), m, n, k)
    if entry is not None:
        cfg = dict(entry["config"])
        if cfg.get("variant", TILED) == TILED or not why_not:
            return cfg, f"{entry['source']}:{entry['shape']}"
    if not why_not:
        return {"variant": PERSISTENT_TMA, **_TMA_DEFAULT, "BLOCK_K": ROW_BYTES // a.element_size()}, "default"
    return None, "autotune"


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
    ``precision`` ("ieee" or "tf32") matters for fp32 operands only. ``config`` (``variant`` "tiled" (the
    default) or "persistent-tma"; BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M; optionally num_warps, num_stages, and for
    the persistent variant WARP_SPECIALIZE, EPILOGUE_SPLIT) runs one launch shape instead of choosing one.
    """
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2 or tuple(c.shape) != (m, n):
        raise ValueError(f"shapes do not chain: a {tuple(a.shape)}, b {tuple(b.shape)}, c {tuple(c.shape)}")
    if max(m * k, k * n, m * n) > _MAX_ELEMENTS:
        raise ValueError(f"an operand of {m}x{n}x{k} has more than 2**31 elements (offsets are 32-bit)")
    if precision not in ("ieee", "tf32"):
        raise ValueError(f"precision must be 'ieee' or 'tf32', not {precision!r}")
    has_scale = scale_a is not None and scale_b is not None
    source = "given"
    key = _problem_key(a, b)
    if config is None:
        # Chosen once per problem (layout, device, export files) and remembered: a benchmark issues the same
        # product back to back, and the host's time per call must stay well under the GPU's.
        plan_key = (key, a.stride(), c.stride(), c.dtype, a.device, os.environ.get(CONFIG_ENV, ""),
                    (a.data_ptr() | b.data_ptr() | c.data_ptr()) % 16 == 0)
        if plan_key not in _PLANS:
            _PLANS[plan_key] = choose(a, b, c)
        config, source = _PLANS[plan_key]
    elif config.get("variant", TILED) == PERSISTENT_TMA:
        why_not = tma_possible(a, b, c)
        if why_not:
            raise ValueError(f"the persistent-tma variant cannot run this product: {why_not}")
    if config is not None and config.get("variant", TILED) == PERSISTENT_TMA:
        _launch_tma(a, b, c, scale_a if has_scale else c, scale_b if has_scale else c, has_scale, config)
        _LAST[key] = (config, source)  # described when asked: this call is on the timed path
        return c
    if config is not None and config.get("variant", TILED) not in VARIANTS:
        raise ValueError(f"unknown variant {config['variant']!r}; one of {', '.join(VARIANTS)}")
    args = (a, b, c, scale_a if has_scale else c, scale_b if has_scale else c, m, n, k,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    if config is None:
        _autotuned[grid](*args, PRECISION=precision, HAS_SCALE=has_scale)
        _LAST.pop(key, None)  # best_config reads the autotuner's cache
    else:
        meta = {k2: v for k2, v in config.items() if k2 != "variant"}
        opts = {name: int(meta.pop(name)) for name in ("num_warps", "num_stages") if name in meta}
        _matmul_kernel[grid](*args, PRECISION=precision, HAS_SCALE=has_scale, **meta, **opts)
        _LAST[key] = ({"variant": TILED, **config}, source)
    return c


def best_config(a: torch.Tensor, b: torch.Tensor) -> str:
    """What this problem last ran with, as text (``describe``); "" before it has run."""
    key = _problem_key(a, b)
    if key in _LAST:
        return describe(*_LAST[key])
    m, n, k, sbk, sbn = key[:5]
    for cache_key, cfg in _autotuned.cache.items():
        if tuple(cache_key[:5]) == (m, n, k, sbk, sbn) and str(a.dtype) in map(str, cache_key[5:]):
            return describe({"variant": TILED, **cfg.kwargs, "num_warps": cfg.num_warps,
                             "num_stages": cfg.num_stages}, "autotune")
    return ""

