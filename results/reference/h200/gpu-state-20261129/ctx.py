# One-off probe: do other processes' live CUDA contexts on the GPU move a process's small GPU figures?
import os, sys, json, time, subprocess, torch
arm = sys.argv[1]
idle = []
if arm != "alone":
    code = ("import torch,time; x=torch.randn(1<<20,device='cuda'); " +
            ("[x.mul_(1.0001) for _ in range(2000)]; " if arm == "busyfirst" else "") +
            "torch.cuda.synchronize(); print('up',flush=True); time.sleep(120)")
    for _ in range(2):
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        p.stdout.readline(); idle.append(p)
torch.cuda.init()
x = torch.zeros(1, device="cuda")
a = torch.randint(0, 255, (1 << 20,), dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
side = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    x.add_(1)
torch.cuda.current_stream().wait_stream(side)
g1 = torch.cuda.CUDAGraph()
with torch.cuda.graph(g1):
    x.add_(1)
torch.cuda.synchronize()
def held(fn, n):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(60_000_000)
    s.record()
    for _ in range(n):
        fn()
    e.record(); e.synchronize()
    return s.elapsed_time(e) * 1e3 / n
res = []
for rep in range(4):
    res.append([round(sorted(held(f, n) for _ in range(5))[2], 4) for f, n in
                ((lambda: x.add_(1), 1000), (lambda: b.copy_(a), 1000), (lambda: g1.replay(), 1000))])
for p in idle:
    p.kill()
print(json.dumps({"arm": arm, "res": res}))
