# one-off probe: is the per-process level of held GPU figures set by buffer placement or by the stream?
import json, random, statistics as st, sys, time, torch
dev = "cuda"
torch.cuda.init()
out = sys.argv[1]; tag = sys.argv[2]
pool = torch.zeros((64 << 20) // 4, device=dev)
offs = [k * ((4 << 20) // 4) + k * 64 for k in range(8)]
streams = [torch.cuda.Stream() for _ in range(8)]
src = [torch.randint(0, 255, (1 << 20,), dtype=torch.uint8, device=dev) for _ in range(8)]
dst = [torch.empty_like(s) for s in src]

def held(fn, n):
    torch.cuda._sleep(60_000_000)
    e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(n):
        fn()
    e1.record(); torch.cuda.synchronize()
    return e0.elapsed_time(e1) * 1000 / n

def gap(x):
    return held(lambda: x.add_(1.0), 2000)

def d2d(i):
    return held(lambda: dst[i].copy_(src[i]), 500)

res = {"tag": tag, "off": {}, "stream": {}, "d2d": {}, "d2d_stream": {}}
for _ in range(3):  # warm
    gap(pool[0:1]); d2d(0)
for rep in range(5):
    for k in random.sample(range(8), 8):
        res["off"].setdefault(k, []).append(gap(pool[offs[k]:offs[k] + 1]))
    for k in random.sample(range(8), 8):
        with torch.cuda.stream(streams[k]):
            res["stream"].setdefault(k, []).append(gap(pool[0:1]))
    for k in random.sample(range(8), 8):
        res["d2d"].setdefault(k, []).append(d2d(k))
    for k in random.sample(range(8), 8):
        with torch.cuda.stream(streams[k]):
            res["d2d_stream"].setdefault(k, []).append(d2d(0))
with open(out, "a") as f:
    f.write(json.dumps(res) + "\n")
