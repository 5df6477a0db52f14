"""Diagnostic 4 for the graph per-node cost (see diag_graph2.py): each scenario in a fresh process, so that
nothing one does leaks into the next. Every scenario ends with the same capture-and-time of a 1000-node
graph of ``x.add_(1)``; only what happens before it differs.

    python tests/gpu/diag_graph4.py            # all scenarios, one line each
    python tests/gpu/diag_graph4.py SCENARIO   # one, in this process
"""

import subprocess
import sys

import torch

from diag_graph2 import capture, per_node


def _cupy():
    import cupy

    k = cupy.RawKernel(r'extern "C" __global__ void k(float* x) { x[0] += 1.0f; }', "k")
    x = cupy.zeros(1, dtype=cupy.float32)
    k((1,), (1,), (x,))
    cupy.cuda.Device().synchronize()


def _triton():
    import triton
    import triton.language as tl

    @triton.jit
    def inc(x):
        tl.store(x, tl.load(x) + 1.0)

    inc[(1,)](torch.zeros(1, device="cuda"))
    torch.cuda.synchronize()


def _sleep():
    torch.cuda._sleep(int(1e-3 * 2e9))
    torch.cuda.synchronize()


def _free_graph():
    g = capture(torch.zeros(1, device="cuda"))
    g.replay()
    torch.cuda.synchronize()
    del g


def _free_three_graphs():
    for _ in range(3):
        _free_graph()


def _empty_cache():
    y = torch.empty(1 << 28, device="cuda")
    del y
    torch.cuda.empty_cache()


def _randint_tensor():
    return torch.randint(-(1 << 20), 1 << 20, (1,), device="cuda").float()


SCENARIOS = {
    "fresh": lambda: None,
    "after_cupy": _cupy,
    "after_triton": _triton,
    "after_sleep": _sleep,
    "after_1_graph_freed": _free_graph,
    "after_3_graphs_freed": _free_three_graphs,
    "after_empty_cache": _empty_cache,
}


def run(name: str) -> None:
    SCENARIOS[name]()
    x = _randint_tensor() if name == "randint_tensor" else torch.zeros(1, device="cuda")
    g = capture(x)
    first = per_node(g)
    print(f"{name}: {first:.3f} us/node")


def main() -> None:
    if len(sys.argv) > 1:
        SCENARIOS.setdefault("randint_tensor", lambda: None)
        run(sys.argv[1])
        return
    for name in [*SCENARIOS, "randint_tensor"]:
        out = subprocess.run([sys.executable, __file__, name], capture_output=True, text=True)
        print(out.stdout.strip() or f"{name}: failed: {out.stderr.strip().splitlines()[-1:]}", flush=True)


if __name__ == "__main__":
    main()
