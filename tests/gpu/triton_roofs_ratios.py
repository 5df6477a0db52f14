"""Triton/torch ratios of a gemm and an elementwise run (issue 29's targets: GEMM ≥ 0.90, elementwise ≥ 0.97).
Usage: python tests/gpu/triton_roofs_ratios.py RUN_DIR [RUN_DIR...]"""

import sys

from gpubench import results

for run in sys.argv[1:]:
    df = results.load(run)
    ok = df[(df["status"] == "ok") & (df["stop"] != "derived")]
    if "op" in df and df["op"].notna().any():
        rate, keys = ok[ok["metric"] == "bandwidth"], ["op", "dtype", "array_bytes"]
    else:
        rate, keys = ok[ok["metric"] == "throughput"], ["dtype", "M", "N", "K"]
    for key, g in rate.groupby(keys, sort=False):
        v = g.set_index("impl")["value"]
        if "torch" in v and "triton" in v:
            cfg = g.set_index("impl").get("impl_config", {}).get("triton", "")
            # The engine's own host-issue probe (host_us): where it nears the time per call, the GPU idles.
            host = g.set_index("impl").get("host_us", {})
            issue = " ".join(f"{i} {host[i]:.1f}" for i in ("torch", "triton") if i in host and host[i] == host[i])
            print(f"{'/'.join(map(str, key))}: torch {v['torch']:.1f} triton {v['triton']:.1f} "
                  f"{g['unit'].iloc[0]} ratio {v['triton'] / v['torch']:.3f}  [{cfg}]"
                  + (f"  host µs per call: {issue}" if issue else ""))
        else:
            print(f"{'/'.join(map(str, key))}: missing impl ({', '.join(v.index)})")
    bad = df[df["status"] != "ok"]
    for _, r in bad.drop_duplicates("case").iterrows():
        print("NOT OK", r["case"], r["status"], r.get("message", ""))
