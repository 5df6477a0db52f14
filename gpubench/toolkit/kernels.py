"""For a suite that times gpubench's own Triton kernels: their launch configurations (read without triton) and the
kernel modules, each imported on first use (they import triton, and config_export pandas)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpubench.kernels.launch_configs import PERSISTENT, TORCH, gemm_kernel_config, parse
from gpubench.toolkit import loaded_on_use

if TYPE_CHECKING:
    from gpubench.kernels import config_export, matmul_triton, stream_triton

_LAZY = {name: f"gpubench.kernels.{name}" for name in ("config_export", "matmul_triton", "stream_triton")}
__getattr__ = loaded_on_use(__name__, _LAZY)

__all__ = ["PERSISTENT", "TORCH", "gemm_kernel_config", "parse", *_LAZY]
