"""Run every Triton stream kernel through Triton's CPU interpreter (TRITON_INTERPRET=1 must be set before
triton is imported, hence a separate process) and check it like the suite does, on an odd length so that
the masked tail is exercised. Prints one 'ok'/'FAIL' line per (dtype, op); exits 1 on any failure."""

import importlib
import math
import sys

import torch

E = importlib.import_module("gpubench.suites.elementwise")

failed = 0
for dtype in E.DTYPES:
    for op, spec in E.OPS.items():
        n = 3 * 8192 + 5
        x = {k: torch.empty(n, dtype=E.DTYPES[dtype]).uniform_(-1, 1) for k in spec.reads}
        if spec.write:
            x[spec.write] = torch.full((n,), math.nan, dtype=E.DTYPES[dtype])
        chk = E._checker(op, dtype)(x, E._triton_run(op)(x))
        print(dtype, op, "ok" if chk.ok else f"FAIL {chk}")
        failed += not chk.ok
# Not bf16: the interpreter does bf16 arithmetic on raw bits (numpy has no bf16), so the fma kernel's native
# bf16 multiply-adds are checked on GPUs only, by the engine's check before every timed case.
for dtype in (d for d in E.FMA_DTYPES if d != "bf16"):
    for op in ("fma0", "fma1", "fma16"):
        n = 8192 + 5
        x = {"a": torch.empty(n, dtype=E.DTYPES[dtype]).uniform_(-1, 1), "c": torch.full((n,), math.nan, dtype=E.DTYPES[dtype])}
        chk = E._checker(op, dtype)(x, E._triton_run(op)(x))
        print(dtype, op, "ok" if chk.ok else f"FAIL {chk}")
        failed += not chk.ok
# --triton-warps: a forced smaller launch shape must compute the same thing.
for op, spec in E.OPS.items():
    n = 3 * 8192 + 5
    x = {k: torch.empty(n, dtype=torch.float32).uniform_(-1, 1) for k in spec.reads}
    if spec.write:
        x[spec.write] = torch.full((n,), math.nan, dtype=torch.float32)
    chk = E._checker(op, "fp32")(x, E._triton_run(op, 1)(x))
    print("fp32 warps=1", op, "ok" if chk.ok else f"FAIL {chk}")
    failed += not chk.ok
sys.exit(1 if failed else 0)
