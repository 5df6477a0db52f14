"""Diagnostic 2 for the per-node graph cost that rises after a few captures (see diag_graph.py): which of
the tensor's address, the graphs kept alive, or the number of captures so far moves it.

    python tests/gpu/diag_graph2.py
"""
import statistics

import torch

N = 1000


def capture(x, nodes=N):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x.add_(1.0)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(nodes):
            x.add_(1.0)
    return g


def per_node(g):
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    t = []
    for _ in range(7):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        t.append(s.elapsed_time(e) * 1e3 / N)
    return statistics.median(t)


def main():
    x = torch.zeros(1, device="cuda")
    graphs = []
    for i in range(6):
        g = capture(x)
        graphs.append(g)
        print(f"same tensor, capture {i + 1}, all kept: {per_node(g):.3f} us/node")
    print(f"first graph again, after 6 captures: {per_node(graphs[0]):.3f}")
    print(f"last graph again: {per_node(graphs[-1]):.3f}")
    del graphs, g
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    g = capture(x)
    print(f"after freeing all graphs + empty_cache, new capture: {per_node(g):.3f}")
    y = torch.zeros(1, device="cuda")
    print(f"new tensor {y.data_ptr():#x} (x at {x.data_ptr():#x}): {per_node(capture(y)):.3f}")


if __name__ == "__main__":
    main()
