"""Host time to issue one GEMM call (no synchronisation, 300 calls after warm-up), torch vs gpubench's Triton
GEMM, bf16 and fp8 at 4096³: where it nears the GPU's time per call the GPU idles between calls."""

import time

import torch

from gpubench.kernels import matmul_triton as mt

s = 4096
for dtype in ("bf16", "fp8"):
    op = torch.float8_e4m3fn if dtype == "fp8" else torch.bfloat16
    a = torch.randn(s, s, device="cuda").to(op)
    b = torch.randn(s, s, device="cuda").to(op).t()
    c = torch.empty(s, s, device="cuda", dtype=torch.bfloat16)
    one = torch.ones((), device="cuda")
    fns = {"torch": (lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16, out=c)) if dtype == "fp8"
           else (lambda: torch.matmul(a, b, out=c)),
           "triton": lambda: mt.matmul(a, b, c, scale_a=one if dtype == "fp8" else None,
                                       scale_b=one if dtype == "fp8" else None)}
    for name, fn in fns.items():
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(300):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        print(f"HOST {dtype} {name}: issue {1e6 * (t1 - t0) / 300:.1f} us/call, total {1e6 * (t2 - t0) / 300:.1f} us/call "
              f"[{mt.best_config(a, b) if name == 'triton' else ''}]", flush=True)
