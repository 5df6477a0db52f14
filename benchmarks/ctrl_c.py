"""How long a Ctrl-C takes to end a run mid-case, on the machine it runs on (README: "about a second").

    python benchmarks/ctrl_c.py                      # 5 tries of this checkout
    python benchmarks/ctrl_c.py --baseline ../main   # that checkout's gpubench and this one's in turn

Each try runs the README's CPU run, `gpubench run --suite elementwise --backend cpu --quick` (as users type it:
`python -m gpubench`, PYTHONPATH=TREE) in a terminal of its own, waits for the first case's line, lets the second
case run for --delay seconds, sends SIGINT to the process group (what a terminal's Ctrl-C does), and times the
run's last line ("interrupted; ... abandoned") and the process's exit from the signal.
"""

from __future__ import annotations

import argparse
import os
import pty
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARGS = ["run", "--suite", "elementwise", "--backend", "cpu", "--quick"]  # the README's CPU run


def one(tree: Path, delay: float, out: Path) -> tuple[float, float, int]:
    """(seconds from the signal to the last line, to the exit, the exit status) of one try, run in a terminal of
    its own (a pseudo-terminal: the live progress bar a user sees)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "120", "TERM": os.environ.get("TERM", "xterm")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    master, terminal = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "gpubench", *ARGS, "--out", str(out)], env=env,
                            stdin=terminal, stdout=terminal, stderr=terminal, start_new_session=True)
    os.close(terminal)
    seen: dict[bytes, float] = {}
    shown = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            shown.extend(chunk)
            for key in (b"[1/", b"interrupted;"):
                if key in shown and key not in seen:
                    seen[key] = time.monotonic()

    threading.Thread(target=read, daemon=True).start()
    while proc.poll() is None and b"[1/" not in seen:
        time.sleep(0.05)
    time.sleep(delay)
    sent = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    code = proc.wait()
    ended = time.monotonic()
    time.sleep(0.2)  # the reader's last lines
    os.close(master)
    last = seen.get(b"interrupted;")
    return (last - sent if last else float("nan")), ended - sent, code


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tries", type=int, default=5)
    ap.add_argument("--delay", type=float, default=2.0, help="seconds into the second case (default: 2)")
    ap.add_argument("--tree", type=Path, default=ROOT)
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout, timed in turn ('before')")
    args = ap.parse_args()
    trees = {"before": args.baseline.resolve()} if args.baseline else {}
    trees["after" if args.baseline else "this"] = args.tree.resolve()
    print(f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; gpubench {' '.join(ARGS)}", flush=True)
    got: dict[str, list[tuple[float, float, int]]] = {label: [] for label in trees}
    with tempfile.TemporaryDirectory(prefix="gpubench-ctrl-c-") as work:
        for k in range(args.tries):
            for label, tree in trees.items():
                got[label].append(one(tree, args.delay, Path(work) / f"{label}-{k}"))
                line, end, code = got[label][-1]
                print(f"  {label:<7} try {k + 1}: last line {line:5.2f} s, exit {end:5.2f} s after SIGINT "
                      f"(status {code})", flush=True)
    for label, tries in got.items():
        ends = [end for _, end, _ in tries]
        print(f"{label}: exit {statistics.median(ends):.2f} s after SIGINT (median of {len(ends)}; "
              f"{min(ends):.2f}-{max(ends):.2f})")
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
