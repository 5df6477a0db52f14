"""``gpubench expect RUNS... --out FILE.toml``: an envelope for ``gpubench check`` from a healthy fleet's check runs
(what each figure typically reads on this GPU model, and where to warn and fail: gpubench/check/envelope.py).
Exit 0, or 2 for input it cannot use."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from gpubench import __version__
from gpubench.errors import UsageError


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="CHECK_RUN_OR_DIR",
                   help="check run directories (each holds check.json), or folders of them")
    p.add_argument("--out", required=True, metavar="FILE.toml", help="envelope file to write")
    p.add_argument("--match", default=None, metavar="REGEX",
                   help="device names the envelope is for (default: exactly the runs' GPU model)")


def _verdicts(paths: list[str]) -> list[tuple[Path, dict]]:
    from gpubench.check.node import VERDICT_FILE  # the check's modules import pandas: not for --help

    found = []
    for p in map(Path, paths):
        if not p.exists():
            raise UsageError(f"{p}: no such file or directory")
        for f in ([p / VERDICT_FILE] if (p / VERDICT_FILE).is_file() else sorted(p.rglob(VERDICT_FILE))):
            found.append((f, json.loads(f.read_text())))
    if not found:
        raise UsageError(f"no check run under {', '.join(paths)}: give the run directories gpubench check wrote")
    return found


def _figures(found) -> tuple[dict[str, list[float]], dict[str, tuple[str, str, bool]], set[str], list[str]]:
    """Per check key: the healthy figures, (unit, better, host-set); the GPU models; the runs' start times."""
    from gpubench import results
    from gpubench.check.judge import shared_with
    from gpubench.levels import set_by_host

    values: dict[str, list[float]] = {}
    kinds: dict[str, tuple[str, str, bool]] = {}
    models, dates, frames = set(), [], {}
    for where, doc in found:
        models |= {g["name"] for g in doc.get("gpus", []) if g.get("name")}
        dates.append(str(doc.get("started") or "")[:10])
        for v in doc.get("verdicts", []):
            # Every measured figure counts, whatever it was judged (with no envelope, many are SKIP: nothing to hold
            # them against yet); one not measured has no value.
            if v.get("kind") != "performance" or v.get("value") is None:
                continue
            run = _moved(v.get("run_dir"), where)
            if run and run not in frames:
                frames[run] = results.load(run)
            row = _row(frames.get(run), v)
            if row is None or shared_with(row):  # a figure measured beside another process is no evidence
                continue
            values.setdefault(v["check"], []).append(float(v["value"]))
            kinds[v["check"]] = (v.get("unit") or "", v.get("better") or "higher", bool(set_by_host(row)))
    return values, kinds, models, sorted(set(dates))


def _moved(run: str | None, verdict_file: Path) -> str | None:
    """A run directory as check.json names it, or where it is now: beside the directory holding check.json (runs
    copied off the node, or into results/reference, keep their names and their cluster folder)."""
    if not run or Path(run).is_dir():
        return run
    here = verdict_file.parent.parent / Path(run).name
    return str(here) if here.is_dir() else run


def _row(df, v):
    if df is None or df.empty:
        return None
    rows = df[(df["case"] == v.get("case")) & (df["unit"] == v.get("unit"))]
    return rows.iloc[0].to_dict() if len(rows) else None


def main(args: argparse.Namespace, argv: list[str]) -> int:
    from gpubench.check import envelope
    from gpubench.console import fmt_value, out_console

    found = _verdicts(args.paths)
    values, kinds, models, dates = _figures(found)
    if len(models) != 1:
        raise UsageError(f"the runs are of {len(models)} GPU models ({', '.join(sorted(models)) or 'none named'}): "
                         "make one envelope per model")
    model = models.pop()
    if not values:
        raise UsageError("no figure of those runs was measured on an idle GPU: nothing to make an envelope from")
    entries = {k: envelope.entry(vs, *kinds[k]) for k, vs in values.items()}
    hosts = sorted({doc.get("host", "?") for _, doc in found})
    source = (f"{len(found)} check runs on {len(hosts)} node(s) ({', '.join(hosts)}), {model}, {', '.join(dates)}, "
              f"gpubench {__version__}")
    env = envelope.Envelope(model, args.match or f"^{re.escape(model)}$", entries, source,
                            meta={"made_by": " ".join(argv), "made_on": envelope.today(), "gpubench_version": __version__,
                                  "runs": len(found)})
    out = envelope.write(env, args.out)
    console = out_console()
    for k, e in entries.items():
        console.print(f"{k}: typical {fmt_value(e.typical)} {e.unit}, warn at {fmt_value(e.warn_at)}, fail at "
                      f"{fmt_value(e.fail_at)} ({e.figures} figures, spread {e.spread:.2%})", markup=False,
                      highlight=False)
    console.print(f"envelope: {out}", markup=False, highlight=False)
    return 0
