"""What the kernel sweep's configuration names mean (``bm128_bn256_w8_s3``, ``ptma_bm128_bn256_w8_s3_es0_ws1``,
``w4_v16``): the autotune-kernels suite writes them into its case ids, and its exports
(gpubench/kernels/config_export.py) read them back into a kernel's launch arguments."""

from __future__ import annotations

from typing import Any

ROW_BYTES = 128  # the Triton GEMM's BLOCK_K × element size (here, so that it is read without importing triton)

TORCH = "torch"  # the baseline's config name: torch's own kernel
PERSISTENT = "ptma"  # a config name's variant token: the persistent-TMA kernel

_NAMES = {"bm": "BLOCK_M", "bn": "BLOCK_N", "w": "num_warps", "s": "num_stages", "v": "vector_bytes",
          "es": "EPILOGUE_SPLIT", "ws": "WARP_SPECIALIZE"}


def parse(config: str) -> dict[str, Any]:
    """``bm128_bn256_w8_s3`` → {"BLOCK_M": 128, "BLOCK_N": 256, "num_warps": 8, "num_stages": 3} (case ids are
    comma-separated, so configurations are written without commas); a leading ``ptma_`` adds
    {"variant": "persistent-tma"}."""
    out: dict[str, Any] = {}
    for item in config.split("_"):
        if item == PERSISTENT:
            out["variant"] = "persistent-tma"
            continue
        key = item.rstrip("0123456789")
        out[_NAMES[key]] = int(item[len(key):])
    return out


def gemm_kernel_config(config: str, dtype: str) -> dict[str, Any]:
    """The whole ``config=`` of matmul_triton.matmul for a GEMM config name: variant, BLOCK_K from the element
    size (128-byte rows), GROUP_M 8."""
    cfg = parse(config)
    size = 1 if dtype == "fp8" else 2
    return {"variant": cfg.pop("variant", "tiled"), **cfg, "BLOCK_K": ROW_BYTES // size, "GROUP_M": 8}


__all__ = ["TORCH", "PERSISTENT", "parse", "gemm_kernel_config"]
