"""gpubench's own cost on the machine it runs on (issue 48): how long the command line takes to start, the fake
backend's node check, and compare, report and import against reading their input. It prints the figures and fails
on none: CI may run it to print them.

    python benchmarks/cost.py                        # everything (several minutes on a 2-core VM)
    python benchmarks/cost.py --only cli,compare     # some parts: cli, check, compare, report, import
    python benchmarks/cost.py --tree ../other        # another checkout's gpubench (run as PYTHONPATH=TREE)
    python benchmarks/cost.py --baseline ../main     # that checkout and this one in turn: before and after

A figure is a whole command's wall time, its start included (interpreter, imports), as a user waits for it: the
median of --repeat runs after one that is not counted (it writes the bytecode caches and the suites' declarations,
as any first run after an install does), with the fastest and slowest, and the CPU time (user + system) the command
used. On a busy machine wall times stretch with the load; CPU times much less. A ratio divides the medians.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PARTS = ("cli", "check", "compare", "report", "import")
# A 10,000-line nccl-tests log: this 2 × 8-rank reduce_scatter with NCCL INFO lines, 45 lines, pasted over and over.
LOG_FIXTURE = ROOT / "tests" / "fixtures" / "nccl-tests" / "nt-2.15-reduce_scatter-2x8-nccl-info.txt"
LOG_LINES = 10_000
# What "reading the input" costs: a fresh interpreter reading every table of the runs with pandas, or the log's lines.
READ_TABLES = ("import sys, pathlib, pandas as pd\n"
               "for d in sys.argv[1:]:\n"
               "    for f in sorted(pathlib.Path(d).rglob('*.parquet')):\n"
               "        pd.read_parquet(f)\n")
READ_LINES = "import sys\nfor f in sys.argv[1:]:\n    open(f).read().splitlines()\n"


def nights_maker():
    """make_nights(dir, n): compare's own maker (tests/synthetic_nights.py) where the checkout has it, else this
    folder's (benchmarks/nights.py); the one used is printed."""
    sys.path[:0] = [str(ROOT / "tests"), str(HERE)]
    try:
        from synthetic_nights import make_nights
    except ImportError:
        from nights import make_nights
    return make_nights


@dataclass
class Timing:
    walls: list[float]
    cpus: list[float]

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    def text(self) -> str:
        return (f"{self.wall:7.3f} s wall ({min(self.walls):.3f}-{max(self.walls):.3f}), "
                f"{statistics.median(self.cpus):.3f} s CPU")


class Bench:
    """Times commands of one checkout's gpubench, or of two in turn (A B A B ...: a machine whose load drifts
    during the call moves both alike)."""

    def __init__(self, trees: dict[str, Path], work: Path, repeat: int):
        self.work, self.repeat = work, repeat
        self.envs = {}
        for label, tree in trees.items():
            env = {**os.environ, "PYTHONPATH": str(tree), "XDG_CACHE_HOME": str(work / "cache" / label),
                   "COLUMNS": "200"}
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # installed packages carry their bytecode: measure with it
            self.envs[label] = env

    def gpubench(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "gpubench", *map(str, args)]

    def time(self, cmd: list[str], ok: tuple[int, ...] = (0,), repeat: int | None = None,
             each: bool = True) -> dict[str, Timing]:
        """``cmd`` run once uncounted, then ``repeat`` times, by each checkout's gpubench in turn (``each``; else
        once, as it does not run gpubench); a run that exits otherwise than ``ok`` stops the benchmark."""
        envs = self.envs if each else {"": next(iter(self.envs.values()))}
        timings = {label: Timing([], []) for label in envs}
        for k in range(1 + (repeat or self.repeat)):
            for label, env in envs.items():
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                proc = subprocess.run(cmd, env=env, cwd=self.work, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True)
                wall = time.perf_counter() - t0
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if proc.returncode not in ok:
                    raise SystemExit(f"{label}: {' '.join(cmd)}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
                if k:
                    timings[label].walls.append(wall)
                    timings[label].cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        return timings


def say(what: str, timings: dict[str, Timing]) -> None:
    for label, t in timings.items():
        print(f"  {what:<44} {label:<7} {t.text()}", flush=True)


def ratio(what: str, ours: dict[str, Timing], yardstick: dict[str, Timing]) -> None:
    base = next(iter(yardstick.values()))
    for label, t in ours.items():
        print(f"  {what:<44} {label:<7} {t.wall / base.wall:7.2f} ×", flush=True)


def cli(b: Bench) -> None:
    print("command line: start-up to exit", flush=True)
    say("python -c pass (the interpreter alone)", b.time([sys.executable, "-c", "pass"], each=False))
    say("gpubench --help", b.time(b.gpubench("--help")))
    say("gpubench list", b.time(b.gpubench("list")))
    say("gpubench run --suite nosuch (usage error)", b.time(b.gpubench("run", "--suite", "nosuch"), ok=(2,)))
    say("gpubench frobnicate (usage error)", b.time(b.gpubench("frobnicate"), ok=(2,)))
    for command in ("list", "info", "run", "compare", "accept", "check", "expect", "calibrate", "export", "import",
                    "report", "roofline"):
        say(f"gpubench {command} --help", b.time(b.gpubench(command, "--help")))


def check(b: Bench) -> None:
    print("node check on the fake backend", flush=True)
    out = b.work / "check"
    say("gpubench check --backend fake", b.time(b.gpubench("check", "--backend", "fake", "--out", out), ok=(0, 1),
                                                repeat=1))


def _nights(make_nights, directory: Path, n: int) -> list[Path]:
    """Nights whose host-timed samples carry the host's pace, as runs write them since schema 7 (so compare pays for
    judging them at the baseline's pace), where the maker can write them (an older checkout's cannot)."""
    try:
        return make_nights(directory, n, paced=True)
    except TypeError:
        return make_nights(directory, n)


def compare(b: Bench, make_nights) -> None:
    print("compare DIR RUN of quick-set nights (--no-record: every repeat judges the same nights)", flush=True)
    for n in (50, 200):
        runs = _nights(make_nights, b.work / f"nights{n}" / "lab", n)
        ours = b.time(b.gpubench("compare", runs[0].parent, runs[-1], "--no-record"), ok=(0, 1))
        read = b.time([sys.executable, "-c", READ_TABLES, runs[0].parent], each=False)
        say(f"gpubench compare, {n} nights", ours)
        say(f"pandas reads their {4 * n} tables", read)
        ratio(f"compare / read, {n} nights", ours, read)


def report(b: Bench, make_nights) -> None:
    print("report of 10 quick-set nights", flush=True)
    runs = make_nights(b.work / "nights10" / "lab", 10)
    ours = b.time(b.gpubench("report", *runs, "--out", b.work / "report"))
    read = b.time([sys.executable, "-c", READ_TABLES, *runs], each=False)
    say("gpubench report, 10 runs", ours)
    say("pandas reads their 40 tables", read)
    ratio("report / read", ours, read)


def import_(b: Bench) -> None:
    text = LOG_FIXTURE.read_text()
    copies = -(-LOG_LINES // len(text.splitlines()))
    log = b.work / "nccl-tests.log"
    log.write_text(text * copies)
    print(f"import of a {len(log.read_text().splitlines()):,}-line nccl-tests log ({copies} runs of "
          f"{LOG_FIXTURE.name})", flush=True)
    ours = b.time(b.gpubench("import", "nccl-tests", log, "--out", b.work / "imported", "--cluster", "bench"))
    read = b.time([sys.executable, "-c", READ_LINES, log], each=False)
    say("gpubench import nccl-tests", ours)
    say("python reads its lines", read)
    ratio("import / read", ours, read)


def machine(trees: dict[str, Path]) -> None:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else "?"
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {model}, {os.cpu_count()} CPUs, {mem:.0f} GiB; "
          f"python {platform.python_version()}")
    for label, tree in trees.items():
        sha = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True).stdout.strip() or "not a git checkout"
        print(f"{label}: gpubench from {tree} ({sha})")
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(PARTS), help=f"parts to run, of {','.join(PARTS)}")
    ap.add_argument("--repeat", type=int, default=5, help="counted runs of each command (default: 5)")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose gpubench is timed (default: this)")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another checkout (e.g. main as it was) timed in turn with --tree, labelled 'before'")
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: a fresh one, removed after)")
    args = ap.parse_args(argv)
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    if set(parts) - set(PARTS):
        ap.error(f"--only: choose from {', '.join(PARTS)}")
    work = args.work or Path(tempfile.mkdtemp(prefix="gpubench-cost-"))
    work.mkdir(parents=True, exist_ok=True)
    trees = {"after" if args.baseline else "this": args.tree.resolve()}
    if args.baseline:
        trees = {"before": args.baseline.resolve(), **trees}
    b = Bench(trees, work.resolve(), args.repeat)
    machine(trees)
    make_nights = nights_maker() if {"compare", "report"} & set(parts) else None
    if make_nights is not None:
        print(f"nights made by {make_nights.__module__}.make_nights", flush=True)
    try:
        for part in parts:
            {"cli": lambda: cli(b), "check": lambda: check(b), "compare": lambda: compare(b, make_nights),
             "report": lambda: report(b, make_nights), "import": lambda: import_(b)}[part]()
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
