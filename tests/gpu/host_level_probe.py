"""Where a process's level of the figures the host sets comes from (issue 47): the process, or the moment?

Starts CHILDREN processes per variant, all alive at once, each with a CUDA context, a tiny tensor and a graph of
100 kernels; once all are ready, asks them round-robin (ROUNDS rounds, a random order each round) for one block
of ~25 ms: the host time of a kernel launch, a 100-node graph replay, an event round trip, a 1 MiB pageable and
pinned copy, and the CPU it ran on. A level that follows the moment moves every child alike; one that follows
the process stays with it. Variants: plain; aslr (setarch -R and PYTHONHASHSEED=0: the same addresses in every
process); born (taskset to CPU from the start); aslr_born (both). BATCHES sets of children.
    python3 tests/gpu/host_level_probe.py OUT.json        (a GPU; prints each child's values in time order)
    python3 tests/gpu/host_level_probe.py --summary OUT.json
"""
import json
import os
import random
import subprocess
import sys
import time

CHILD = r'''
import ctypes, json, os, statistics, sys, time
import torch
libc = ctypes.CDLL(None)
x = torch.zeros(1, device="cuda")
g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    x.add_(1.0)
torch.cuda.current_stream().wait_stream(s)
with torch.cuda.graph(g):
    for _ in range(100):
        x.add_(1.0)
src = torch.randn(1 << 18)  # 1 MiB pageable
pin = torch.randn(1 << 18).pin_memory()
dst = torch.empty(1 << 18, device="cuda")
torch.cuda.synchronize()
def timed(fn, n):
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return statistics.median(out) * 1e6
def ev_rt():
    x.add_(1.0)
    e = torch.cuda.Event(); e.record()
    while not e.query():
        pass
def h2d_pageable():
    dst.copy_(src); torch.cuda.synchronize()
def h2d_pinned():
    dst.copy_(pin, non_blocking=True); torch.cuda.synchronize()
def rollup(key):
    try:
        for line in open("/proc/self/smaps_rollup"):
            if line.startswith(key):
                return int(line.split()[1])
    except OSError:
        return None
# warm-up half a second
end = time.perf_counter() + 0.5
while time.perf_counter() < end:
    timed(lambda: x.add_(1.0), 50)
print("ready", flush=True)
for line in sys.stdin:
    r = {"pid": os.getpid(), "cpu": libc.sched_getcpu(), "t": time.time(),
         "launch": timed(lambda: x.add_(1.0), 400),
         "graph100": timed(g.replay, 100),
         "event_rt": timed(ev_rt, 200),
         "h2d_pageable": timed(h2d_pageable, 50),
         "h2d_pinned": timed(h2d_pinned, 50),
         "cpu_after": libc.sched_getcpu(),
         "x_addr": x.data_ptr(), "src_addr": src.data_ptr(), "anon_huge_kb": rollup("AnonHugePages")}
    print(json.dumps(r), flush=True)
'''


def start(variant, cpu):
    env = dict(os.environ)
    cmd = [sys.executable, "-c", CHILD]
    if variant in ("aslr", "aslr_born"):
        env["PYTHONHASHSEED"] = "0"
        cmd = ["setarch", os.uname().machine, "-R", *cmd]
    if variant in ("born", "aslr_born"):
        cmd = ["taskset", "-c", str(cpu), *cmd]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, bufsize=1)


def main():
    out = sys.argv[1]
    n = int(os.environ.get("CHILDREN", "5"))
    rounds = int(os.environ.get("ROUNDS", "6"))
    variants = os.environ.get("VARIANTS", "plain aslr born aslr_born").split()
    cpu = int(os.environ.get("CPU", "15"))
    batches = int(os.environ.get("BATCHES", "2"))
    rows = []
    for b in range(batches):
        kids = [(v, i, start(v, cpu)) for v in variants for i in range(n)]
        t0 = time.time()
        for v, i, p in kids:
            line = p.stdout.readline()
            assert line.strip() == "ready", (v, i, line)
        print(f"batch {b}: {len(kids)} ready in {time.time() - t0:.1f} s", flush=True)
        for r in range(rounds):
            order = list(kids)
            random.shuffle(order)
            for v, i, p in order:
                p.stdin.write("go\n")
                p.stdin.flush()
                d = json.loads(p.stdout.readline())
                d.update(batch=b, variant=v, child=f"{b}-{v}-{i}", round=r)
                rows.append(d)
        for _, _, p in kids:
            p.stdin.close()
        for _, _, p in kids:
            p.wait(timeout=30)
        with open(out, "w") as f:
            json.dump(rows, f)
        print(f"batch {b} done", flush=True)
    summarize(rows)


def summarize(rows):
    import statistics as st
    from collections import defaultdict
    by = defaultdict(list)
    for r in rows:
        by[r["child"]].append(r)
    for key in ("launch", "graph100", "event_rt", "h2d_pageable"):
        print(f"== {key} (µs): per child, its rounds' values in time order")
        for child, rs in sorted(by.items()):
            rs.sort(key=lambda r: r["round"])
            vals = " ".join(f"{r[key]:6.2f}" for r in rs)
            cpus = sorted({r["cpu"] for r in rs})
            print(f"{child:16s} med {st.median(r[key] for r in rs):7.2f} | {vals} | cpus {cpus}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--summary":
        summarize(json.load(open(sys.argv[2])))
    else:
        main()
