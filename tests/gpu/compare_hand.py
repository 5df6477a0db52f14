"""Acceptance check: gpubench's elementwise copy/triad against the hand probe measured in the same command.

    python tests/gpu/compare_hand.py RUN_DIR hand.json

Prints one line per (op, size): gpubench torch and triton GB/s, the hand figure, the ratio, the CV; exits 1
if torch is not within 2% of the hand figure, triton is slower than torch beyond noise, or CV > 1%.
"""

from __future__ import annotations

import json
import sys

from gpubench import results


def main(run_dir: str, hand_path: str) -> int:
    df = results.load(run_dir)
    hand = json.load(open(hand_path))["probe"]
    bw = df[(df.metric == "bandwidth") & (df.dtype == "fp32") & (df.op.isin(["copy", "triad"]))]
    failed = 0
    for size, ops in hand.items():
        for op, h in ops.items():
            rows = bw[(bw.op == op) & (bw.array_bytes == int(size))].set_index("impl")
            if rows.empty:
                print(f"{op} {size}: not in the run")
                failed += 1
                continue
            torch_bw, torch_cv = rows.loc["torch", "value"], rows.loc["torch", "cv"]
            line = f"{op:6s} {int(size) >> 20:5d} MiB  hand {h['GBps']:7.1f}  torch {torch_bw:7.1f} (cv {100 * torch_cv:.2f}%)"
            ratio = torch_bw / h["GBps"]
            ok = abs(ratio - 1) <= 0.02 and torch_cv <= 0.01
            if "triton" in rows.index:
                tri_bw, tri_cv = rows.loc["triton", "value"], rows.loc["triton", "cv"]
                line += f"  triton {tri_bw:7.1f} (cv {100 * tri_cv:.2f}%)  triton/torch {tri_bw / torch_bw:.4f}"
                ok = ok and tri_cv <= 0.01 and tri_bw >= torch_bw * (1 - max(torch_cv, tri_cv))
            line += f"  torch/hand {ratio:.4f}  {'PASS' if ok else 'FAIL'}"
            print(line)
            failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:3]))
