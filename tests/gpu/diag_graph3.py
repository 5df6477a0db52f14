"""Diagnostic 3 (see diag_graph2.py): does torch.cuda.empty_cache() alone, or freeing device memory, move
the per-node replay cost of a graph that stays alive? (Its first run, 2026-11-21, imported diag_graph2
before it had a main guard, so every figure came after graphs had been destroyed: 1.055 throughout. Not yet
run cleanly.)

    python tests/gpu/diag_graph3.py
"""
import torch

from diag_graph2 import capture, per_node

x = torch.zeros(1, device="cuda")
g = capture(x)
print(f"fresh: {per_node(g):.3f} us/node")
torch.cuda.empty_cache()
print(f"after empty_cache (nothing cached to free): {per_node(g):.3f}")
big = torch.empty(1 << 28, device="cuda")
del big
print(f"after a 1 GiB tensor freed into torch's cache: {per_node(g):.3f}")
torch.cuda.empty_cache()
print(f"after empty_cache released it (cudaFree): {per_node(g):.3f}")
g2 = capture(x)
print(f"new capture after that: {per_node(g2):.3f}")
