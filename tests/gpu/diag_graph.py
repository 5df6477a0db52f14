"""Diagnostic: GPU time per node of a 1000-node CUDA graph of x.add_(1), captured and timed the same way
several times in one process. On an H200 (2026-11-21) the first three graphs gave 0.84 us/node and every
later one 1.02 us/node, whatever the tensor's values and whether CuPy or Triton had run: per-node cost
depends on the process's graph history (cause not established).

    python tests/gpu/diag_graph.py
"""
import torch

from diag_graph2 import capture
from diag_graph2 import per_node as _time


def per_node(x):
    return _time(capture(x))  # the graph is freed when this returns, as in the first run


print("zeros", per_node(torch.zeros(1, device="cuda")))
print("randint.float", per_node(torch.randint(-(1 << 20), 1 << 20, (1,), device="cuda").float()))
print("uniform", per_node(torch.empty(1, device="cuda").uniform_(-1000, 1000)))
print("zeros again", per_node(torch.zeros(1, device="cuda")))
import cupy
k = cupy.RawKernel(r'extern "C" __global__ void inc(float* x) { x[0] += 1.0f; }', "inc")
y = torch.zeros(1, device="cuda"); k((1,), (1,), (cupy.asarray(y),)); torch.cuda.synchronize()
print("after cupy", per_node(torch.zeros(1, device="cuda")))
import triton, triton.language as tl
@triton.jit
def _inc(x):
    tl.store(x, tl.load(x) + 1.0)
_inc[(1,)](y); torch.cuda.synchronize()
print("after triton", per_node(torch.zeros(1, device="cuda")))
