"""One-off (issue 47): does a pure-CPU probe, timed in the same moment, explain the host-set figures' levels?

Usage: python3 tests/gpu/host_pace_probe.py SECONDS TAG OUT.jsonl (results/reference/h200/host-pace-20261128/)."""
import json, os, random, sys, time
import numpy as np
import torch

pc = time.perf_counter

def med(xs):
    xs = sorted(xs); return xs[len(xs) // 2]

def cpu_now():
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])

def steal():
    with open("/proc/stat") as f:
        p = f.readline().split()
    return int(p[8])

def main(seconds, tag, out):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.zeros(1, device=dev)
    host = torch.empty(1 << 18, dtype=torch.float32).uniform_()  # 1 MiB pageable
    dst = torch.empty(1 << 18, dtype=torch.float32, device=dev)
    a = np.random.rand(16); b = np.random.rand(16); c = np.empty(16)
    m4s = np.random.rand(1 << 19); m4d = np.empty_like(m4s)   # 4 MiB
    m64s = np.random.rand(1 << 23); m64d = np.empty_like(m64s)  # 64 MiB
    if dev == "cuda":
        ev = torch.cuda.Event()
        torch.cuda.synchronize()

    def p_py():
        t = pc()
        for _ in range(5000):
            pass
        return (pc() - t) * 1e6
    def p_np():
        t = pc()
        for _ in range(100):
            np.add(a, b, out=c)
        return (pc() - t) * 1e6 / 100
    def p_sys():
        t = pc()
        for _ in range(200):
            os.getppid()
        return (pc() - t) * 1e6 / 200
    def p_m4():
        t = pc(); np.copyto(m4d, m4s); return (pc() - t) * 1e6
    def p_m64():
        t = pc(); np.copyto(m64d, m64s); return (pc() - t) * 1e6
    def g_launch():
        s = []
        for _ in range(30):
            torch.cuda.synchronize(); t = pc(); x.add_(1.0); s.append(pc() - t)
        return med(s) * 1e6
    def g_event():
        s = []
        for _ in range(10):
            torch.cuda.synchronize(); t = pc(); ev.record()
            while not ev.query():
                pass
            s.append(pc() - t)
        return med(s) * 1e6
    def g_h2d():
        s = []
        for _ in range(5):
            torch.cuda.synchronize(); t = pc(); dst.copy_(host); torch.cuda.synchronize(); s.append(pc() - t)
        return med(s) * 1e6
    probes = dict(py=p_py, np=p_np, sys=p_sys, m4=p_m4, m64=p_m64, launch=g_launch, event=g_event, h2d=g_h2d)
    if not torch.cuda.is_available():
        for k in ("launch", "event", "h2d"):
            del probes[k]
    for f in probes.values():  # warm
        f(); f()
    rows = []
    end = pc() + seconds
    i = 0
    while pc() < end:
        order = list(probes); random.shuffle(order)
        st0 = steal()
        r = {"tag": tag, "pid": os.getpid(), "block": i, "t": time.time(), "cpu": cpu_now()}
        for k in order:
            r[k] = probes[k]()
        r["steal"] = steal() - st0
        rows.append(r); i += 1
    with open(out, "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(tag, len(rows), "blocks", flush=True)

if __name__ == "__main__":
    main(float(sys.argv[1]), sys.argv[2], sys.argv[3])
