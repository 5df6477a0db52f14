# one-off probe (not committed): where do pageable-copy and host-launch per-process levels come from?
import os, sys, time, json, mmap, ctypes
import numpy as np, torch
MiB = 1 << 20
out = sys.argv[1]
add = np.add; a = np.ones(16); b = np.ones(16); c = np.empty(16)
def pace():
    t0 = time.perf_counter()
    for _ in range(100):
        os.getppid(); add(a, b, out=c)
    return time.perf_counter() - t0
src1, dst1 = np.random.rand(1 << 17), np.empty(1 << 17)
src32, dst32 = np.random.rand(4 << 20), np.empty(4 << 20)
def mpace(src, dst, k=3):
    best = []
    for _ in range(k):
        t0 = time.perf_counter(); np.copyto(dst, src); best.append(time.perf_counter() - t0)
    return float(np.median(best)) * 1e6
np.copyto(dst1, src1); np.copyto(dst32, src32)
def cpu():
    with open("/proc/thread-self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])
dev = torch.device("cuda:0"); torch.cuda.init(); torch.zeros(1, device=dev)
keep = []
def fill(t): t.copy_(torch.randint(0, 256, t.shape, dtype=torch.uint8)); return t
def pageable(n):
    t = fill(torch.empty(n, dtype=torch.uint8)); keep.append(torch.empty(3 * MiB + 4096 * len(keep), dtype=torch.uint8).fill_(1)); return t
def thp(n):
    m = mmap.mmap(-1, n + 2 * MiB); keep.append(m)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m)); off = (-addr) % (2 * MiB)
    m.madvise(mmap.MADV_HUGEPAGE, off, n)
    return fill(torch.from_numpy(np.frombuffer(m, dtype=np.uint8, count=n, offset=off)))
bufs = {"b0": pageable(MiB), "b1": pageable(MiB), 
        "b256": pageable(256 * MiB), "thp256": thp(256 * MiB)}
gpu = {n: torch.empty(t.numel(), dtype=torch.uint8, device=dev) for n, t in bufs.items()}
rec = []
def time_copy(name, d, k):
    h, g = bufs[name], gpu[name]
    out = []
    for _ in range(k):
        t0 = time.perf_counter_ns()
        if d == "h2d": g.copy_(h, non_blocking=True)
        else: h.copy_(g, non_blocking=True)
        torch.cuda.synchronize()
        out.append((time.perf_counter_ns() - t0) / 1e3)
    return out
x = torch.zeros(1, device=dev)
def launch_us(n=300):
    torch.cuda.synchronize(); t0 = time.perf_counter_ns()
    for _ in range(n): x.add_(1)
    t = (time.perf_counter_ns() - t0) / 1e3 / n; torch.cuda.synchronize(); return t
for name in bufs:  # warm
    time_copy(name, "h2d", 2); time_copy(name, "d2h", 2)
for _ in range(200): x.add_(1)
allowed = sorted(os.sched_getaffinity(0))
t_start = time.time()
for rnd in range(8):
    for name in bufs:
        k = 2 if "256" in name else 8
        for d in ("h2d", "d2h"):
            p = pace(); m1 = mpace(src1, dst1); m32 = mpace(src32, dst32, 1); s = time_copy(name, d, k)
            rec.append({"r": rnd, "v": name, "d": d, "pace": p * 1e6, "m1": m1, "m32": m32, "cpu": cpu(), "s": s})
    p = pace(); rec.append({"r": rnd, "v": "launch", "d": "-", "pace": p * 1e6, "cpu": cpu(), "s": [launch_us() for _ in range(3)]})
for rnd in range(0):
    for core in allowed:
        os.sched_setaffinity(0, {core})
        for d in ("h2d", "d2h"):
            p = pace(); s = time_copy("b0", d, 6)
            rec.append({"r": rnd, "v": f"core{core}", "d": d, "pace": p * 1e6, "cpu": cpu(), "s": s})
        p = pace(); rec.append({"r": rnd, "v": f"core{core}", "d": "launch", "pace": p * 1e6, "cpu": cpu(), "s": [launch_us() for _ in range(3)]})
    os.sched_setaffinity(0, set(allowed))
json.dump({"pid": os.getpid(), "wall": time.time() - t_start, "rec": rec}, open(out, "w"))
