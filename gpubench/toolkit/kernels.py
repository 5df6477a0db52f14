"""For a suite that times gpubench's own Triton kernels: their launch configurations (read without triton) and the
kernel modules, each imported on first use (they import triton, and config_export pandas)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gpubench.kernels.launch_configs import PERSISTENT, TORCH, gemm_kernel_config, parse

if TYPE_CHECKING:
    from gpubench.kernels import config_export, matmul_triton, stream_triton

_LAZY = ("config_export", "matmul_triton", "stream_triton")

__all__ = ["PERSISTENT", "TORCH", "gemm_kernel_config", "parse", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return importlib.import_module(f"gpubench.kernels.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
