# one-off probe (not committed): is a process's host speed level a property of the vCPU it runs on?
import os, sys, time, json
import numpy as np, torch
out = sys.argv[1]
add = np.add; a = np.ones(16); b = np.ones(16); c = np.empty(16)
def pace():
    t0 = time.perf_counter()
    for _ in range(100):
        os.getppid(); add(a, b, out=c)
    return (time.perf_counter() - t0) * 1e6
dev = torch.device("cuda:0"); torch.zeros(1, device=dev)
x = torch.zeros(1, device=dev)
h = torch.empty(1 << 20, dtype=torch.uint8); h.copy_(torch.randint(0, 256, (1 << 20,), dtype=torch.uint8))
g = torch.empty(1 << 20, dtype=torch.uint8, device=dev)
def launch_us(n=300):
    torch.cuda.synchronize(); t0 = time.perf_counter_ns()
    for _ in range(n): x.add_(1)
    t = (time.perf_counter_ns() - t0) / 1e3 / n; torch.cuda.synchronize(); return t
def h2d_us():
    t0 = time.perf_counter_ns(); g.copy_(h, non_blocking=True); torch.cuda.synchronize(); return (time.perf_counter_ns() - t0) / 1e3
for _ in range(3): launch_us(); h2d_us()
rec = {"cpu": sorted(os.sched_getaffinity(0)), "pace": [], "launch": [], "h2d": []}
for r in range(6):
    rec["pace"] += [pace() for _ in range(5)]
    rec["launch"] += [launch_us() for _ in range(3)]
    rec["h2d"] += [h2d_us() for _ in range(8)]
    time.sleep(0.1)
json.dump(rec, open(out, "w"))
