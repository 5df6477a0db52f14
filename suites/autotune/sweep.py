"""``gpubench run --suite autotune``: the collective knob sweep's driver.

Each configuration is a child ``gpubench run --suite comm`` with the configuration's ``NCCL_*`` settings in its
environment: fresh processes (NCCL caches its parameters per process), the comm suite's exact check on every case
(a configuration that corrupts data is ``invalid``, never fast), and its own watchdog (no hang). A configuration
NCCL rejects becomes error rows and the sweep goes on. Rows are written as each configuration ends; the child
runs (tables, logs) stay inside the autotune run directory. The default configuration runs
:data:`~gpubench.suites.autotune.knobs.DEFAULT_RUNS` times, first, through the sweep and last: how far its runs
disagree is the noise a winner must beat (winners.py). ``--budget MINUTES`` stops starting configurations whose
expected time would pass it; those are recorded as skipped. A sweep on a backend whose collectives read no NCCL knob
(cpu: gloo) is refused before anything starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import replace
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpubench.toolkit import Case, Option, RunRequest, Suite, UsageError, read, resolve_name, results
from gpubench.toolkit.console import fmt_value, out_console, param_text
from gpubench.toolkit.ranks import DEFAULT_TIMEOUT_S, command as module_command, dumps
from gpubench.toolkit.results import RunDir, ensure_writable, figure, finish
from gpubench.suites.autotune import exports, knobs, winners
from gpubench.suites.comm import table as commtable

SUITE = "autotune"


def child_argv(request: RunRequest, out: Path, child: str = "comm", declared: Sequence[Option] = ()) -> list[str]:
    """The command line, as typed, of one child run of suite ``child`` whose options are ``declared``: ``gpubench
    run``'s own options as the user gave them, and every declared option of the child suite (none can be dropped on
    the way). The child's ranks are given it; its run.json keeps it."""
    argv = ["gpubench", "run", "--suite", child, "--out", str(out), "--cluster", request.how.cluster]
    if request.where.backend is not None:
        argv += ["--backend", request.where.backend]
    if request.what.dtype_text is not None:
        argv += ["--dtype", request.what.dtype_text]
    for option in declared:
        argv += option.argv(request.what.given.get(option.dest))
    argv += ["--nproc", str(request.where.nproc)] if request.where.nproc is not None else []
    argv += ["--timeout", str(request.where.timeout)] if request.where.timeout != DEFAULT_TIMEOUT_S else []
    argv += ["--quick"] if request.how.quick else []
    argv += [] if request.how.telemetry else ["--no-telemetry"]
    return argv


def trial_request(request: RunRequest, out: Path, child: Suite) -> RunRequest:
    """The run's own request for one trial: the ``child`` suite in its place with its options as given, written
    under ``out``, and the command line that says so (``gpubench run --suite comm ...``)."""
    what = replace(request.what, suites=(child,), case_filter=None, search=False,
                   options={child.name: read(child.options, request.what.given)})
    return replace(request, what=what, how=replace(request.how, out=str(out)),
                   argv=tuple(child_argv(request, out, child.name, child.options)))


def grid_of(given: Mapping[str, Any]) -> dict[str, list[str]]:
    """The knobs to sweep, from autotune's options as given (--knob or --grid), else the default grid."""
    if given.get("grid") and given.get("knob"):
        raise UsageError("give the knobs either with --knob or in a --grid file, not both")
    if given.get("grid"):
        return knobs.load_grid(given["grid"])
    if given.get("knob"):
        return knobs.parse_knobs(given["knob"])
    return dict(knobs.DEFAULT_GRID)


def _rows_of(child_run: Path, config: knobs.Config, grid: dict, run_id: str, version: int) -> pd.DataFrame:
    df = results.load(child_run)
    df = df.assign(suite=SUITE, suite_version=version, run_id=run_id, config=config.name,
                   config_run=child_run.name, case="config=" + config.label + "," + df["case"].astype(str))
    for knob in grid:
        df[knob] = config.get(knob) or ""
    return df


def _placeholder(config: knobs.Config, grid: dict, run_id: str, version: int, status: str, message: str) -> list[dict]:
    """Rows for a configuration that measured nothing: one per comm metric, so it shows in every view."""
    knobs_set = {k: config.get(k) or "" for k in grid}
    return [finish({**figure({"run_id": run_id}, SUITE, version, Case.of(config=config.name), m, []), **knobs_set,
                    "case": "config=" + config.label}, status, message) for m in commtable.METRICS]


def run(request: RunRequest, version: int, params: tuple[str, ...], child: Suite) -> int:
    """Sweep the knobs over runs of the ``child`` suite (comm), each given the run's request for it."""
    given, out, cluster = request.what.given, request.how.out, request.how.cluster
    grid = grid_of(given)
    knobs.check_backend(resolve_name(request.where.backend or "auto"), grid)
    configs = knobs.schedule(knobs.configs(grid))
    budget = given.get("budget")
    budget_s = budget * 60 if budget is not None else None
    if budget_s is not None and budget_s <= 0:
        raise UsageError(f"--budget {budget} must be a positive number of minutes")
    ensure_writable(out, cluster)
    rd = RunDir.create(out, cluster, {
        "argv": list(request.argv), "backend": request.where.backend, "quick": bool(request.how.quick),
        "suites": {SUITE: {"version": version, "cases": len(configs)}},
        "autotune": {"grid": grid, "configs": list(dict.fromkeys(c.name for c in configs)),
                     "default_runs": knobs.DEFAULT_RUNS, "env_in_force": knobs.in_force(), "budget_min": budget},
    })
    staging = rd.path / "configs"
    frames: list[pd.DataFrame] = []
    console = out_console()
    started, spent = time.monotonic(), []
    status = "complete"
    try:
        with Progress(TextColumn("autotune"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.description}"), console=console, transient=True) as bar:
            task = bar.add_task("", total=len(configs))
            for i, config in enumerate(configs):
                elapsed = time.monotonic() - started
                expected = sum(spent) / len(spent) if spent else 0.0
                if budget_s is not None and i > 0 and elapsed + expected * _reserve(configs, i) > budget_s:
                    frames.append(pd.DataFrame(_placeholder(config, grid, rd.run_id, version, "skipped",
                                                            f"--budget {budget} min reached")))
                    bar.advance(task)
                    continue
                bar.update(task, description=_title(config))
                t0 = time.monotonic()
                frames.append(_one(request, config, i, staging, grid, rd, version, child))
                spent.append(time.monotonic() - t0)
                df = results.frame(pd.concat(frames, ignore_index=True).to_dict("records"), params)
                rd.write_table(SUITE, df)
                console.print(f"[{i + 1}/{len(configs)}] {_title(config)}: {_headline(frames[-1])} "
                              f"({spent[-1]:.1f} s)", markup=False, highlight=False)
                bar.advance(task)
    except KeyboardInterrupt:
        status = "interrupted"
    except BaseException as e:
        rd.finish("failed", error=f"{type(e).__name__}: {e}")
        raise
    df = results.frame(pd.concat(frames, ignore_index=True).to_dict("records"), params) if frames else None
    if df is not None:
        rd.write_table(SUITE, df)
    code = _finish(rd, df, console)
    rd.finish(status, configs_done=len(spent))
    return 130 if status == "interrupted" else code


def _reserve(configs: Sequence[knobs.Config], i: int) -> int:
    """How many runs' time configuration ``i`` must leave room for: its own, and, for another than the default, the
    default's runs still to come (without them no gain can be told from noise)."""
    if configs[i].name == knobs.DEFAULT:
        return 1
    return 1 + sum(c.name == knobs.DEFAULT for c in configs[i + 1:])


def _title(config: knobs.Config) -> str:
    return f"{config.name} (run {config.repeat} of {knobs.DEFAULT_RUNS})" if config.name == knobs.DEFAULT else \
        config.name


def _one(request: RunRequest, config: knobs.Config, i: int, staging: Path, grid: dict, rd: RunDir, version: int,
         child: Suite) -> pd.DataFrame:
    cluster = request.how.cluster
    out = staging / f"{i:02d}"
    log = staging / f"{i:02d}.log"
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **dict(config.env)}
    given = staging / f"{i:02d}.request"
    given.write_text(dumps(trial_request(request, out, child)))
    with open(log, "w") as f:
        # Never `python -m gpubench` as such: a folder named gpubench where the sweep was started would be imported
        proc = subprocess.run(module_command("gpubench.run.measure", str(given)), env=env, stdout=f,
                              stderr=subprocess.STDOUT)
    runs = sorted(p.parent for p in out.glob(f"{cluster}/*/run.json"))
    if runs and (runs[-1] / f"{commtable.SUITE}{results.TABLE_SUFFIX}").exists():
        if config.name == knobs.DEFAULT:  # the system the sweep ran on, for compare and the report
            child = json.loads((runs[-1] / results.RUN_FILE).read_text())
            rd.meta.update({k: child[k] for k in ("fingerprint", "dist", "backend") if k in child})
            rd.flush()
        return _rows_of(runs[-1], config, grid, rd.run_id, version)
    tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()][-1:] or ["no output"]
    return pd.DataFrame(_placeholder(config, grid, rd.run_id, version, "error",
                                     f"comm run exited {proc.returncode}: {tail[0]}"))


def _headline(df: pd.DataFrame) -> str:
    counts = df.drop_duplicates("case")["status"].value_counts().to_dict()
    return ", ".join(f"{n} {s}" for s, n in counts.items())


def _finish(rd: RunDir, df: pd.DataFrame | None, console: Console) -> int:
    """The winner table, the exports, and the exit code: 1 when the default configuration measured nothing."""
    if df is None or not (df[(df["config"] == knobs.DEFAULT)]["status"] == "ok").any():
        console.print("autotune: the default configuration measured nothing; no winners", markup=False)
        return 1
    win = winners.table(df)
    win.to_csv(rd.path / "winners.csv", index=False)
    console.print(winners_table(win))
    best = winners.best_single(df)
    dist = rd.meta.get("dist") or {}
    world, nnodes = int(dist.get("world_size") or -1), int(dist.get("nnodes") or -1)  # -1: the tuner's "any"
    if best is not None:
        (rd.path / "best.env").write_text(exports.env_file(best, provenance=f"run {rd.run_id}"))
        console.print(_best_line(best), markup=False, highlight=False)
    (rd.path / "nccl-tuner.csv").write_text(exports.tuner_csv(win, nnodes, world))
    console.print(f"run directory: {rd.path} (winners.csv, best.env, nccl-tuner.csv)", markup=False,
                  highlight=False)
    return 0


_KEY_HEADS = {"collective": "collective", "bytes": "bytes", "dtype": "dtype", "op": "op", "inplace": "in place"}


def winners_table(win: pd.DataFrame) -> Table:
    """The winners on the terminal, one line per case: collective, size, and the rest of the key where it varies
    within a collective (all_gather in place and out of place), so that no two lines read alike; what is the same
    on every line goes into the title."""
    def text(col: str, value: object) -> str:
        if col == "inplace":
            return "yes" if bool(value) else "no"
        return param_text(col, value)

    rest = [k for k in winners.KEY if k not in ("collective", "bytes")]
    keys = ["collective", "bytes", *(k for k in rest if len(win) and
                                     win.astype({k: str}).groupby("collective")[k].nunique().max() > 1)]
    fixed = [k for k in rest if win[k].astype(str).nunique() == 1]
    title = "autotune winners (the default's busbw in GB/s; winners.csv has every figure)"
    if fixed and len(win):
        title += "\n" + ", ".join(f"{_KEY_HEADS[k]}={text(k, win[k].iloc[0])}" for k in fixed)
    t = Table(title=escape(title), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
              collapse_padding=True)
    for k in keys:  # what tells one line from another is never cut
        t.add_column(_KEY_HEADS[k], no_wrap=True)
    for col in ("default", "winner", "speedup", "beyond\nnoise"):
        number = col in ("default", "speedup")  # a number folded over two lines reads as two
        t.add_column(col, justify="right" if number else "left", no_wrap=number, overflow="fold")
    for _, r in win.iterrows():
        winner = escape(str(r["winner"]).replace(",", ", "))  # a long configuration wraps between its knobs
        t.add_row(*(escape(text(k, r[k])) for k in keys), fmt_value(r["default_busbw"]), winner,
                  f"{r['speedup']:.3f}", "yes" if r["beyond_noise"] else "no")
    return t


def _best_line(best: winners.Best) -> str:
    if best.name == knobs.DEFAULT:
        return "best.env: nothing to set (no configuration read above the default)"
    if best.beyond_noise:
        return f"best.env: {best.name}, {best.score:.3f}x the default's busbw ({best.note})"
    return f"best.env: nothing to set: the best, {best.name}, read {best.score:.3f}x, within noise ({best.note})"


__all__ = ["run", "child_argv", "grid_of", "winners_table"]
