"""``gpubench import nccl-tests FILE...``: logs → one run directory with a ``comm.parquet`` table.

Every file is read and checked before the directory is made, so a bad log leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpubench.toolkit import UsageError, results
from gpubench.toolkit.console import fmt_value
from gpubench.toolkit.nccl import ParseError, Row, Run, dtype_of, parse_json, parse_text
from gpubench.toolkit.results import RunDir, amend, check_label, identity_hash, joined
from gpubench.suites.comm import table as commtable


@dataclass
class Imported:
    run_dir: RunDir
    runs: list[Run]
    rows: int
    warnings: list[str] = field(default_factory=list)
    invalid: list[int] = field(default_factory=list)  # placements each run's tool found wrong (by run)
    failed: list[Run] = field(default_factory=list)  # runs that died ("Test NCCL failure ..."), kept with the reason


def read(path: str | os.PathLike, *, collective: str | None = None, tool: str = "nccl-tests",
         ranks: int | None = None) -> list[Run]:
    """The runs of one log file: nccl-tests ``-J`` JSON when it starts with ``{``, else text."""
    source = str(path)
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as e:
        raise UsageError(f"cannot read {source}: {e.strerror or e}") from e
    head = text.lstrip()[:1]
    if head == "{":
        return parse_json(text, source, collective=collective)
    if head == "[" and _is_json(text):  # a log may start with a launcher's "[1,0]<stdout>:" too
        raise ParseError(source, 1, "rccl-tests' -x/-Z report files are not read (their size is the receive "
                                    "size, not the table's); import the text log instead")
    return parse_text(text, source, collective=collective, tool=tool, ranks=ranks)


def _is_json(text: str) -> bool:
    import json

    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def default_cluster(runs: list[Run]) -> str:
    """The host of rank 0 of the first run (as `gpubench run` defaults to its own host), made a safe label."""
    for run in runs:
        if run.devices:
            host = min(run.devices, key=lambda d: d.rank).host.split(".")[0]
            label = re.sub(r"[^A-Za-z0-9._-]", "-", host).lstrip("._-")[:64]
            if label:
                return label
    return "imported"


def import_logs(paths: list[str], *, tool: str, out: str, cluster: str | None, collective: str | None,
                argv: list[str], env: dict[str, str] | None = None,
                method: dict[str, Any] | None = None, ranks: int | None = None) -> Imported:
    """Import nccl-tests/rccl-tests logs as one run. ``env`` and ``method`` (comm method columns such as
    ``register``) are what gpubench knows of binaries it started itself and the logs do not print."""
    warnings: list[str] = []
    runs: list[Run] = []
    files = []
    for path in paths:
        # nccl-tests and rccl-tests logs are read alike; each run records the tool its log names (the summary line
        # says it), whichever was typed.
        found = read(path, collective=collective, tool=tool, ranks=ranks)
        if not found:
            raise ParseError(path, None, f"no {tool} run in this file (no '# nThread' line or result table)")
        data = Path(path).read_bytes()
        kind = "json" if (found[0].generation or "").startswith("json") else "text"
        files.append({"path": str(path), "sha256": hashlib.sha256(data).hexdigest(), "format": kind,
                      "runs": len(found)})
        runs.extend(found)
    failed = [r for r in runs if r.failure]
    for run in runs:
        if not run.rows and not run.failure:
            warnings.append(f"{run.source}:{run.line}: a run with no result rows (did it fail? "
                            f"{'; '.join(run.errors) or 'no error printed'})")
        warnings += [f"{run.source}:{run.line}: {w}" for w in _notes(run)]
    label = check_label(cluster or default_cluster(runs))
    fp = fingerprint(runs, label)
    if env:  # the NCCL/RCCL settings the binaries ran with, when gpubench started them (a text log has none)
        fp["volatile"]["env"] = {**env, **fp["volatile"]["env"]}
    # Convert everything before the directory exists: a row that fails its check stops the import here.
    staged, wrong = [], []
    for i, run in enumerate(runs):
        rows = comm_rows(run)
        staged.append([{**r, "import_run": i} for r in rows])
        # The footer counts the placements the tool found wrong; the rows should say the same.
        invalid = len({(r["source"], r["inplace"]) for r in rows if r["status"] == "invalid"})
        wrong.append(invalid)
        mismatch = _out_of_bounds(run, invalid)
        if mismatch:
            warnings.append(f"{run.source}:{run.line}: {mismatch}")
    total = sum(len(s) for s in staged)
    if not total and not failed:
        raise UsageError(f"no result rows in {', '.join(paths)}: nothing to import")
    meta = {
        "argv": argv,
        "backend": fp["identity"]["backend"],
        "suites": {commtable.SUITE: {"version": commtable.SUITE_VERSION}},
        "imported": {
            "tool": tool,
            "tools": sorted({r.tool for r in runs}),
            "versions": sorted({r.version or f"unknown ({r.generation} format)" for r in runs if r.rows}),
            "files": files,
            "runs": [r.summary() for r in runs],
        },
        "fingerprint": fp,
    }
    rd = RunDir.create(out, label, meta)
    if not total:  # every run died before its first result: a failed run that keeps why
        rd.finish("failed", failure="; ".join(f"{r.source}:{r.line}: {r.failure}" for r in failed),
                  nccl_warnings=[w for r in failed for w in r.warnings])
        return Imported(rd, runs, 0, warnings, wrong, failed)
    base = {"run_id": rd.run_id, "cluster": label, "backend": fp["identity"]["backend"]}
    rows: list[dict[str, Any]] = []
    for run, staged_rows in zip(runs, staged):
        first = min(run.devices, key=lambda d: d.rank) if run.devices else None
        where = {"device": first.name if first else None, "host": first.host if first else None}
        rows.extend({**base, **where, **r, **(method or {})} for r in staged_rows)
    df = results.frame(rows, commtable.PARAMS)
    rd.meta["suites"][commtable.SUITE]["cases"] = int(df["case"].nunique())
    rd.write_table(commtable.SUITE, df)
    rd.finish("complete", cases_done=int(df["case"].nunique()),
              **({"failure": "; ".join(f"{r.source}:{r.line}: {r.failure}" for r in failed)} if failed else {}))
    return Imported(rd, runs, len(df), warnings, wrong, failed)


def _processes(run: Run) -> int | None:
    """How many processes printed the run (its device lines' pids), where the log lists them all."""
    pids = {(d.host, d.pid) for d in run.devices if d.pid is not None}
    return len(pids) if pids and len(run.devices) == run.world_size else None


def _out_of_bounds(run: Run, invalid: int) -> str | None:
    """What is true when the footer's count is not the rows' wrong results. nccl-tests counts one per wrong result
    per thread, then sums over threads and processes (src/common.cu): 2 wrong rows of 2 processes print 4."""
    if not run.rows or run.out_of_bounds is None or run.out_of_bounds == invalid:
        return None
    procs = _processes(run)
    threads = int(run.config.get("nthreads") or 1)
    if procs and run.out_of_bounds == invalid * procs * threads:
        return None  # as the tool counts: one per wrong result in each of its processes
    per = (f"; nccl-tests counts each wrong result once per process and thread, so {invalid} over {procs} process(es)"
           f" would print {invalid * procs * threads}" if procs else "")
    return (f"the footer counts {run.out_of_bounds} out-of-bounds result(s) and the rows show {invalid} wrong "
            f"result(s){per}: rows are missing from the log, or a printed error sits at its bound")


def _notes(run: Run) -> list[str]:
    """What a reader of the run should know that the rows do not say: columns read from rows without a table header,
    how the world size was found where no device lines gave it, and a footer average the rows kept do not
    reproduce (a truncated paste)."""
    out = []
    if run.config.get("header_from_rows"):
        out.append(f"no table header above the rows: their columns read as `{run.config['header_from_rows']}`")
    if run.config.get("world_size_from"):
        out.append(f"world size {run.world_size} from {run.config['world_size_from']}")
    if run.rows and run.avg_busbw is not None and math.isfinite(run.avg_busbw):
        kept = [r for r in run.rows if math.isfinite(r.busbw)]
        mean = sum(r.busbw for r in kept) / len(kept) if kept else math.nan
        # The footer is the mean of the unrounded figures, printed with %g (six significant digits: 202818 for
        # 202818.204): the printed rows' mean lies within their mean rounding of it, the footer within its own.
        slack = run.avg_busbw_tol + sum(r.busbw_tol for r in kept) / max(len(kept), 1)
        if kept and abs(mean - run.avg_busbw) > slack * (1 + 1e-9) + 1e-12:
            out.append(f"the rows kept average {mean:.3f} GB/s busbw and the footer says {run.avg_busbw:g}: rows "
                       "are missing from this log (a truncated paste?)")
    return out


# --- convert: a parsed run → rows of gpubench's ``comm`` table (:func:`gpubench.suites.comm.table.imported_rows`).
# Figures are copied as printed, each row checked against busbw = algbw × busbw_factor; the validation columns map
# as docs/nccl-tests.md, "Column mapping" and "The old error column", says.


# nccl-tests' DeltaMaxValue (src/common.cu before 2.13): the per-rank error bound by type; integers must match.
ERROR_BOUND = {"half": 1e-2, "bfloat16": 1e-2, "float": 1e-5, "double": 1e-12}
EXACT = 1e-200


def error_bound(type_name: str, world_size: int) -> float:
    return ERROR_BOUND.get(type_name, EXACT) * (world_size - 1)


def consistent(row: Row, factor: float) -> bool:
    """busbw = algbw × factor within the print rounding of both figures (non-finite figures pass)."""
    if not all(math.isfinite(v) for v in (row.algbw, row.busbw, row.algbw_tol, row.busbw_tol)):
        return True
    slack = row.busbw_tol + factor * row.algbw_tol
    return abs(row.busbw - row.algbw * factor) <= slack * (1 + 1e-9) + 1e-12


def comm_rows(run: Run, base: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Rows of the comm table (three per placement: time, algbw, busbw) for ``run``."""
    if not run.rows:
        return []
    coll = run.collective
    if coll not in commtable.COLLECTIVES:
        raise ParseError(run.source, run.line, f"{coll} results have no place in gpubench's comm table (it holds "
                                               f"{', '.join(commtable.COLLECTIVES)})")
    n = run.world_size
    if not n:
        raise ParseError(run.source, run.line, "the log lists no devices: the world size is unknown")
    factor = commtable.busbw_factor(coll, n)
    fnuz = bool(run.config.get("fp8_fnuz"))
    engine = run.tool
    known = method(run)
    out = []
    for row in run.rows:
        note = ""
        if not consistent(row, factor):
            if coll in ("all_gather", "reduce_scatter") and run.generation == "pre-2.13" and consistent(row, 1.0):
                note = ("busbw = algbw as nccl-tests printed it before 2020-06 (algbw then counted size×(n-1)/n); "
                        "not comparable with later logs")
            else:
                raise ParseError(run.source, row.line,
                                 f"busbw {row.busbw:g} is not algbw {row.algbw:g} × {factor:.4g} ({coll}, {n} "
                                 "ranks) within print rounding: the world size or the collective is wrong "
                                 "(pass --collective, or check the device lines)")
        dtype = dtype_of(row.type, fnuz=fnuz)
        rows = commtable.imported_rows(
            collective=coll, nbytes=row.size, count=row.count, dtype=dtype,
            op=row.redop if coll in commtable.REDUCING and row.redop else "none",
            inplace=row.placement == "in", time_us=row.time_us, algbw=row.algbw, busbw=row.busbw,
            wrong=row.wrong, world_size=n, nnodes=run.nnodes, engine=engine,
            root=row.root if row.root is not None else -1,
            base={**(base or {}), "source": f"{run.source}:{row.line}", **known})
        judged = _judged(row, n, engine) if row.error is not None or row.flagged else {}
        said = joined(note, "time is CPU time (-C 1)" if run.config.get("cputime") else "")
        out.extend(amend(r, note=said, **judged) for r in rows)
    return out


# NCCL_VERSION(2,19,0): from these headers on, nccl-tests takes its buffers from ncclMemAlloc (AllocateBuffs in
# src/common.cu), before them from cudaMalloc.
MEM_ALLOC_HEADERS = 21900


def method(run: Run) -> dict[str, Any]:
    """The comm table's method columns (``graph``, ``alloc``, ``register``; see :mod:`gpubench.compare.settings`)
    that the log tells. A column it does not tell is left out, so that a comparison counts it as unknown.

    ``graph`` comes from the header's (or the JSON config's) ``graph:``. ``alloc`` from the ``nccl-headers=`` of
    nccl-tests' version line (2.17.4+); rccl-tests allocates otherwise and is not told. ``register`` from ``-R``
    in the JSON file's argv (a text log does not print it; gpubench's own engine knows it from its command);
    ``-R 2``, symmetric registration, has no counterpart in gpubench and is left unknown. ``layout`` from the
    header's ``nThread`` and ``nGpus`` (each process's threads, each thread's GPUs)."""
    out: dict[str, Any] = {}
    if isinstance(run.config.get("graph"), (bool, int)):
        out["graph"] = bool(run.config["graph"])
    try:  # JSON files of some versions give them as strings
        threads, gpus = int(run.config["nthreads"]), int(run.config["ngpus"])
    except (KeyError, TypeError, ValueError):
        threads = gpus = 0
    if threads >= 1 and gpus >= 1:
        out["layout"] = commtable.layout_name(threads, gpus)
    headers = run.config.get("nccl_headers")
    if run.tool == "nccl-tests" and isinstance(headers, int):
        out["alloc"] = "nccl" if headers >= MEM_ALLOC_HEADERS else "cudaMalloc"
    args = run.config.get("args")
    if isinstance(args, list):
        level = _register_level([str(a) for a in args[1:]])
        if level in (0, 1):
            out["register"] = bool(level)
    return out


def _register_level(words: list[str]) -> int | None:
    """The value of ``-R``/``--local_register`` in nccl-tests' argv (0 when absent, None when unreadable)."""
    level: int | None = 0
    for i, a in enumerate(words):
        value = None
        if a in ("-R", "--local_register"):
            value = words[i + 1] if i + 1 < len(words) else ""
        elif a.startswith("--local_register="):
            value = a.split("=", 1)[1]
        elif a.startswith("-R"):
            value = a[2:]
        if value is not None:
            try:
                level = int(value, 0)
            except ValueError:
                level = None
    return level


def _judged(row: Row, n: int, engine: str) -> dict[str, Any]:
    """The columns a pre-2.13 `error` column sets: valid when the printed deviation is within the tool's bound."""
    bound = error_bound(row.type, n)
    error = row.error
    valid = not row.flagged and error is not None and not math.isnan(error) and error <= bound
    judged = {"valid": valid, "wrong": None, "check_error": error, "check_tolerance": bound}
    if not valid:
        judged["status"] = "invalid"
        judged["message"] = (f"max abs error {fmt_value(error)} above {engine}' bound {fmt_value(bound)} "
                             f"({row.type}, {n} ranks)" if error is not None and not row.flagged else
                             f"{engine} marked the error {fmt_value(error)} as above its threshold")
    return judged


# --- identity: a fingerprint (the shape of :func:`gpubench.machine.fingerprint.collect`'s) built from what logs say
# of a system; what they cannot say is None (docs/nccl-tests.md, "Fingerprint").


def _one(values: Sequence[str]) -> str | None:
    values = sorted({v for v in values if v})
    return " + ".join(values) if values else None


def _per_node(run: Run) -> int:
    """The most ranks any one host of the run held (what a node of the system has, as far as the log shows)."""
    hosts = Counter(d.host for d in run.devices)
    return max(hosts.values(), default=0)


def fingerprint(runs: Sequence[Run], cluster: str) -> dict[str, Any]:
    rccl = any(r.tool == "rccl-tests" for r in runs)
    first = min(runs[0].devices, key=lambda d: d.rank) if runs and runs[0].devices else None
    identity = {
        "source": "import",
        "backend": "hip" if rccl else "cuda",
        "gpu_model": _one([d.name for r in runs for d in r.devices]),
        # GPUs of one node, as a measured run's gpu_count counts them (compare's system key); the ranks are below.
        "gpu_count": max((_per_node(r) for r in runs), default=0),
        "world_size": max((r.world_size or 0 for r in runs), default=0),
        "runtime": "hip" if rccl else "cuda",
        "runtime_version": _one([r.config.get("hip_version") for r in runs]),
        "memory_bytes": None,
        "cluster": cluster,
        "hostname": first.host if first else None,
        "hostnames": sorted({d.host for r in runs for d in r.devices}),
        "nnodes": max((r.nnodes or 0 for r in runs), default=0),
        "cpu_model": None,
        "cpu_count": None,
        "os": None,
        "python": None,
        "torch": None,
        "nccl": _one([r.nccl_version for r in runs]),
        "collective_lib": "rccl" if rccl else "nccl",
        "driver_version": None,
        "tool": _one([r.tool for r in runs]),
        "tool_version": _one([r.version for r in runs]),
    }
    env: dict[str, str] = {}
    for r in runs:
        env.update(r.config.get("env") or {})
    volatile = {"telemetry_source": "none", "env": env, "imported": True}
    return {"identity": identity, "volatile": volatile, "fingerprint": identity_hash(identity)}
