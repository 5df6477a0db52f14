"""The kernel-config sweep's winners in reusable forms: ``gpubench export RUN --format tunableop|triton-configs``.

``tunableop``: a CSV in the layout of PyTorch TunableOp's results file — validator lines (torch, CUDA/HIP, GPU),
then one ``op signature,params signature,solution,time in ms`` line per shape. The solutions are gpubench's Triton
launch shapes, not BLAS solutions, so TunableOp itself cannot load the file; the layout lets the same tooling
read both. Sizes are in torch's terms (M, N, K; elements), not BLAS column-major order.
``triton-configs``: JSON of the winning launch configurations per kernel, dtype and shape (for the GEMM the whole
``config=`` of gpubench.kernels.matmul_triton.matmul, variant included), with the speed against torch and the GPU
they were measured on. gpubench's Triton GEMM reads such files for that GPU: the ones under
gpubench/kernels/configs/ and any named in GPUBENCH_TRITON_CONFIGS.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from gpubench.kernels.launch_configs import TORCH, gemm_kernel_config, parse

_TORCH_DTYPE = {"bf16": "BFloat16", "fp16": "Half", "fp32": "Float", "fp8": "Float8_e4m3fn"}
_KERNEL_METRIC = {"gemm": "throughput", "triad": "bandwidth"}


def winners(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Per (kernel, dtype, shape) of a kernel sweep's table: the best Triton configuration, its median time, its
    figure and torch's. The sweep's rows are those naming a kernel and one of its launch configurations."""
    if not {"kernel", "config"} <= set(df.columns):
        return []
    rows = df[df["kernel"].notna() & (df["status"] == "ok") & df["config"].notna() & (df["config"] != "best")]
    out = []
    for (kernel, dtype, shape), group in rows.groupby(["kernel", "dtype", "shape"], sort=False):
        figure = group[group["metric"] == _KERNEL_METRIC.get(kernel, "throughput")].set_index("config")["value"]
        time = group[group["metric"] == "time"].set_index("config")
        tuned = figure.drop(TORCH, errors="ignore").astype(float)
        if tuned.empty:
            continue
        best = tuned.idxmax()
        base = float(figure.get(TORCH, math.nan))
        unit = time.loc[best, "unit"]
        ms = float(time.loc[best, "value"]) * {"s": 1e3, "ms": 1.0, "us": 1e-3, "ns": 1e-6}[unit]
        out.append({"kernel": kernel, "dtype": dtype, "shape": shape, "config": best, "args": parse(best),
                    "time_ms": ms, "figure": float(tuned[best]), "torch": base,
                    "speedup_vs_torch": float(tuned[best]) / base if base else math.nan})
    return out


def tunableop_csv(df: pd.DataFrame, meta: dict[str, Any]) -> str:
    ident = _identity(meta)
    lines = [f"Validator,PT_VERSION,{ident.get('torch', 'unknown')}",
             f"Validator,{'HIP' if ident.get('runtime') == 'hip' else 'CUDA'}_VERSION,"
             f"{ident.get('runtime_version', 'unknown')}",
             f"Validator,GPU,{ident.get('gpu_model', 'unknown')}",
             f"Validator,GPUBENCH_RUN,{meta.get('run_id', 'unknown')}"]
    for w in winners(df):
        dtype = _TORCH_DTYPE.get(w["dtype"], w["dtype"])
        if w["kernel"] == "gemm":
            m, n, k = w["shape"].split("x")
            lines.append(f"TritonGemm_{dtype}_NT,nt_{m}_{n}_{k},Triton_{w['config']},{w['time_ms']:.6g}")
        else:
            lines.append(f"Triton{w['kernel'].capitalize()}_{dtype},bytes_{w['shape']},Triton_{w['config']},"
                         f"{w['time_ms']:.6g}")
    return "\n".join(lines) + "\n"


def _identity(meta: dict[str, Any]) -> dict[str, Any]:
    fp = meta.get("fingerprint")
    return fp.get("identity", {}) if isinstance(fp, dict) else {}


def triton_configs(df: pd.DataFrame, meta: dict[str, Any]) -> str:
    doc: dict[str, Any] = {"run_id": meta.get("run_id"), "gpu": _identity(meta).get("gpu_model"), "kernels": {}}
    for w in winners(df):
        args = gemm_kernel_config(w["config"], w["dtype"]) if w["kernel"] == "gemm" else dict(w["args"])
        doc["kernels"].setdefault(w["kernel"], {}).setdefault(w["dtype"], {})[w["shape"]] = {
            "config": args, "time_ms": w["time_ms"], "speedup_vs_torch": w["speedup_vs_torch"]}
    return json.dumps(doc, indent=2, default=str) + "\n"


__all__ = ["winners", "tunableop_csv", "triton_configs"]
