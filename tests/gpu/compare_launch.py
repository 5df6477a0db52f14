"""Acceptance check for the launch suite against hand_launch_probe.py, run in the same command:

    python tests/gpu/compare_launch.py RUN_DIR hand-launch.json

eager host cost and graph per-node (GPU) within 5% of the hand figures; the raw (CuPy) host launch cost
below torch's. Exits 1 if any fails. The host cost of one 1000-node replay is printed beside the probe's
for information: the probe times one replay, gpubench a batch (docs/measurements.md).
"""

from __future__ import annotations

import json
import sys

from gpubench import results


def main(run_dir: str, hand_path: str) -> int:
    df = results.load(run_dir)
    t = df[(df.suite == "launch") & (df.metric == "time") & (df.status == "ok")]
    val = {(r.measure, r.api, int(r.nodes)): r.value for r in t.itertuples()}
    hand = json.load(open(hand_path))
    pairs = [
        ("eager host launch (torch)", val.get(("host_launch", "torch", 1)), hand["eager_host_us"]),
        ("graph per node (GPU)", val.get(("graph_replay_per_node", "torch", 0)), hand["graph_gpu_per_kernel_us"]),
    ]
    if "eager_host_us_400" in hand:
        print(f"{'hand eager, batches of 1000 / 400':32s} {hand['eager_host_us']:.3f} / {hand['eager_host_us_400']:.3f} us"
              f"  (400: {hand['eager_host_us_400_min']:.3f}-{hand['eager_host_us_400_max']:.3f})")
        ours = val.get(("host_launch", "torch", 1))
        if ours is not None:
            print(f"{'eager vs hand batches of 400':32s} ratio {ours / hand['eager_host_us_400']:.3f} (information)")
    info = ("graph replay host, 1000 nodes", val.get(("graph_launch", "torch", 1000)), hand["graph_replay_host_us_1000"])
    failed = 0
    for name, ours, theirs in pairs:
        ok = ours is not None and abs(ours / theirs - 1) <= 0.05
        print(f"{name:32s} gpubench {ours if ours is None else f'{ours:.3f}'} us  hand {theirs:.3f} us  "
              f"ratio {'—' if ours is None else f'{ours / theirs:.3f}'}  {'PASS' if ok else 'FAIL'}")
        failed += not ok
    name, ours, theirs = info
    print(f"{name:32s} gpubench {ours if ours is None else f'{ours:.3f}'} us  hand {theirs:.3f} us  (information)")
    raw, torch_ = val.get(("host_launch", "raw", 1)), val.get(("host_launch", "torch", 1))
    ok = raw is not None and torch_ is not None and raw < torch_
    print(f"{'raw < torch host launch':32s} raw {raw} us  torch {torch_} us  {'PASS' if ok else 'FAIL'}")
    failed += not ok
    for key in sorted(val):
        print(f"  {key}: {val[key]:.3f} us")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:3]))
