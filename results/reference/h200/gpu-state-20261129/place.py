# One-off probe: does the small GPU figures' level follow where their data lives (the tensor's address)?
import os, json, torch, sys
torch.cuda.init()
dev = "cuda"
N = 24
# 24 single floats, each at the start of its own 2 MiB block (a different physical page each), and 8 at offsets
# within one block
blocks = [torch.zeros(1 << 19, device=dev) for _ in range(N)]
xs = [b[:1] for b in blocks] + [blocks[0][k * 4096 // 4: k * 4096 // 4 + 1] for k in (1, 2, 3, 5, 8, 16, 33, 100)]
bufs = [(torch.randint(0, 255, (1 << 20,), dtype=torch.uint8, device=dev), torch.empty(1 << 20, dtype=torch.uint8, device=dev)) for _ in range(8)]
def capture(x):
    side = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x.add_(1)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        x.add_(1)
    return g
graphs = [capture(x) for x in xs]
torch.cuda.synchronize()
def held(fn, n, cycles=40_000_000):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(cycles)
    s.record()
    for _ in range(n):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e3 / n
out = {"pid": os.getpid(), "gap": [], "rep": [], "d2d": [], "addr": [x.data_ptr() for x in xs]}
for rnd in range(3):
    out["gap"].append([round(sorted(held(lambda: x.add_(1), 1000) for _ in range(3))[1], 4) for x in xs])
    out["rep"].append([round(sorted(held(lambda: g.replay(), 1000) for _ in range(3))[1], 4) for g in graphs])
    out["d2d"].append([round(sorted(held(lambda: b.copy_(a), 500) for _ in range(3))[1], 4) for a, b in bufs])
print(json.dumps(out))
