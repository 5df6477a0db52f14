# One-off probe: what sets a process's level of the 1-node graph replay, the gpu gap and a 1 MiB d2d copy?
import os, json, torch
torch.cuda.init()
dev = "cuda"
arm = os.environ.get("ARM", "plain")
x = torch.zeros(1, device=dev)
a = torch.randint(0, 255, (1 << 20,), dtype=torch.uint8, device=dev); b = torch.empty_like(a)
def capture(n):
    side = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x.add_(1)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            x.add_(1)
    return g
def held(stream, fn, n):
    with torch.cuda.stream(stream):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(40_000_000)
        s.record()
        for _ in range(n):
            fn()
        e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e3 / n
if arm == "warm":  # as the nights' first process: elementwise and GEMM work first
    m = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16); big = torch.randn(64 << 20, device=dev)
    for _ in range(200):
        m @ m; big.mul_(1.0001)
    torch.cuda.synchronize()
bigs = [capture(n) for n in (1000, 100, 10)] if arm in ("bigcap", "bigrep") else []
if arm == "bigrep":
    for g in bigs:
        for _ in range(200):
            g.replay()
    torch.cuda.synchronize()
g1 = capture(1)
torch.cuda.synchronize()
out = {"arm": arm, "pid": os.getpid(), "rows": []}
streams = [("default", torch.cuda.current_stream()), ("new", torch.cuda.Stream())]
for rep in range(3):
    for name, st in streams:
        gap = sorted(held(st, lambda: x.add_(1), 2000) for _ in range(5))[2]
        cp = sorted(held(st, lambda: b.copy_(a), 1000) for _ in range(5))[2]
        rp = sorted(held(st, lambda: g1.replay(), 1000) for _ in range(5))[2]
        out["rows"].append([rep, name, round(gap, 4), round(cp, 4), round(rp, 4)])
print(json.dumps(out))
