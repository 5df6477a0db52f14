"""Helpers the history tests share (no tests here): a directory of synthetic nights, as ci/nightly.sh keeps them,
and the page's data read back.

Each night is a copy of one committed H100 night (results/reference/h100/gate-memory-20261125: 157 figures of
elementwise, copy, launch and gemm), every figure moved by a little noise and by the events a year brings: a
regression that recovers, one that is accepted, software and settings that change, a night on a shared GPU and
one on a busy host. The gate's records are written as compare writes them (verdict.json, accepted.json: the
formats of gpubench.compare.gate_memory), with the WORSE nights chosen here, so a test knows which nights are red
without running the gate 365 times. These are not measurements: they test the page's drawing and its scale.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from gpubench import results
from gpubench.compare import gate_memory as memory
from gpubench.compare.load import scan

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "results" / "reference" / "h100" / "gate-memory-20261125" / "runs" / "20261125T184855Z-57eba7"
KEY = ("suite", "case", "metric")
START = datetime(2025, 11, 27, 3, 0, tzinfo=timezone.utc)
SCALED = ("value", "mean", "min", "max", "stdev", "iqr")


@dataclass
class Year:
    """What the nights hold, as a test checks it on the page."""

    directory: Path
    run_ids: list[str] = field(default_factory=list)
    keys: list[tuple[str, str, str]] = field(default_factory=list)
    worse: dict[str, set] = field(default_factory=dict)  # run_id -> figures its verdict.json names WORSE
    judged: set[str] = field(default_factory=set)  # run_ids with a verdict.json
    changed: dict[str, str] = field(default_factory=dict)  # run_id -> the setting that changed that night
    hollow: dict[str, str] = field(default_factory=dict)  # run_id -> shared GPU / busy host
    accepted: dict[str, tuple] = field(default_factory=dict)  # run_id -> (figure, reason)
    recovered: dict[str, tuple] = field(default_factory=dict)  # run_id -> figure back at its level that night
    recovering: int = 0  # the rows (of keys) of the regressions that recover, are accepted, are still open
    accepting: int = 0
    opening: int = 0


def run_id(i: int) -> str:
    return f"{(START + timedelta(days=i)):%Y%m%dT%H%M%SZ}-{i:06x}"


def _iso(i: int, hours: float = 0.0) -> str:
    return (START + timedelta(days=i, hours=hours)).isoformat()


def template(figures: int) -> tuple[pd.DataFrame, dict]:
    """``figures`` ok rows with a value of the template night (evenly spread over its 140, so every suite has
    some; past 140, copies of them under another case id), and its run.json."""
    df = results.load(TEMPLATE)
    meta = dict(df.attrs["run"])
    df = df[(df["status"] == "ok") & df["value"].notna()].reset_index(drop=True)
    df.attrs = {}  # pandas deep-copies attrs (run.json) on every column read: 10× the time of writing the nights
    if figures <= len(df):
        return df.iloc[np.linspace(0, len(df) - 1, figures).round().astype(int)].reset_index(drop=True), meta
    twins = [df.assign(case=df["case"] + f",twin={k}") for k in range(1, -(-figures // len(df)))]
    return pd.concat([df, *twins], ignore_index=True).iloc[:figures], meta


@dataclass
class _Plan:
    """The events of a year of ``n`` nights, at fixed fractions of it."""

    n: int

    def at(self, fraction: float) -> int:
        return max(4, min(self.n - 1, int(self.n * fraction)))

    def __post_init__(self):
        self.recovers = (self.at(0.55), 5)  # first night, nights WORSE
        self.accepted = (self.at(0.8), 3)  # first night, nights WORSE before `gpubench accept`
        self.open = (self.n - 2, 2)  # WORSE on the last two nights: still open
        self.changes = {self.at(0.3): "torch", self.at(0.45): "NCCL_ALGO", self.at(0.75): "run options"}
        self.hollow = {self.at(0.35): memory.SHARED, self.at(0.72): memory.BUSY}


def _meta(base: dict, i: int, plan: _Plan) -> dict:
    meta = copy.deepcopy(base)
    meta.update(run_id=run_id(i), start_time=_iso(i), end_time=_iso(i, 0.05), status="complete")
    identity = meta["fingerprint"]["identity"]
    env = meta["fingerprint"]["volatile"].setdefault("env", {})
    for at, what in plan.changes.items():
        if i >= at and what == "torch":
            identity["torch"] = "2.14.0+cu130"
        if i >= at and what == "NCCL_ALGO":
            env["NCCL_ALGO"] = "Ring"
        if i >= at and what == "run options":
            meta["argv"] = [*meta["argv"], "--processes", "1"]
    why = plan.hollow.get(i)
    if why == memory.SHARED:
        meta["contention"] = {"contended": "pid 4842 (python3)", "cases": {}}
    elif why == memory.BUSY:
        meta["contention"] = {"contended": "", "cases": {},
                              "host": {"loaded": True, "others_share": 0.9, "cpus": 16, "loaded_cases": {}}}
    return meta


def _record(path: Path, i: int, worse: list[dict]) -> None:
    doc = {"format": memory.RECORD_FORMAT, "version": memory.FILE_VERSION, "run_id": run_id(i),
           "judged_at": _iso(i, 1), "baseline": {"label": str(path.parent), "runs": [], "left_out": {}},
           "rerun": None, "exit_code": 1 if worse else 0, "summary": {}, "worse": worse}
    (path / memory.RECORD).write_text(json.dumps(doc))


def _accept(path: Path, i: int, key: tuple, since: int, reason: str) -> None:
    doc = {"format": memory.ACCEPTED_FORMAT, "version": memory.FILE_VERSION, "acceptances": [
        {"at": _iso(i, 2), "by": "lead@ci", "reason": reason, "filter": None,
         "figures": [{"suite": key[0], "case": key[1], "metric": key[2], "from": run_id(since)}]}]}
    (path / memory.ACCEPTED).write_text(json.dumps(doc))


def _factors(df: pd.DataFrame, i: int, year: Year, plan: _Plan, rng: np.random.Generator) -> np.ndarray:
    """Each row's multiple of its template samples on night ``i``: noise, a 15 % step on the events' figures, half
    speed on the night the GPU was shared."""
    f = 1.0 + rng.normal(0.0, 0.004, len(df))
    worse = np.where(df["better"] == "higher", 0.85, 1.15)
    first, count = plan.recovers
    if first <= i < first + count:
        f = np.where(df.index == year.recovering, f * worse, f)
    if i >= plan.accepted[0]:
        f = np.where(df.index == year.accepting, f * worse, f)
    if i >= plan.open[0]:
        f = np.where(df.index == year.opening, f * worse, f)
    if plan.hollow.get(i) == memory.SHARED:  # another process on the GPU: every figure at half speed
        f = f * np.where(df["better"] == "higher", 0.5, 2.0)
    return f


def _worse_of(i: int, df: pd.DataFrame, year: Year, plan: _Plan) -> list[dict]:
    """The figures the gate found WORSE on night ``i``, as compare records them (change: current / baseline − 1)."""
    out = []
    for row, (first, count) in ((year.recovering, plan.recovers), (year.accepting, plan.accepted),
                                (year.opening, plan.open)):
        if first <= i < first + count:
            out.append({**{k: df.at[row, k] for k in KEY}, "change": -0.15 if df.at[row, "better"] == "higher"
                        else 0.15, "since": run_id(first), "nights": i - first + 1})
    return out


class _Table:
    """The template as the Arrow table :func:`results.save` writes (footer included), made once: a night is that
    table with its run_id, figures and samples replaced, 20× faster than saving a DataFrame each night."""

    def __init__(self, df: pd.DataFrame, scratch: Path):
        results.save(df, scratch)
        self.table = pq.read_table(scratch)
        scratch.unlink()
        samples = self.table.column("samples").combine_chunks()
        self.offsets, self.flat = samples.offsets, samples.flatten().to_numpy(zero_copy_only=False)
        self.lengths = np.diff(self.offsets.to_numpy())

    def night(self, rid: str, f: np.ndarray) -> pa.Table:
        t = self.table
        t = t.set_column(t.schema.get_field_index("run_id"), "run_id", pa.array([rid] * len(t)))
        for col in SCALED:
            i = t.schema.get_field_index(col)
            t = t.set_column(i, col, pa.array(t.column(col).to_numpy(zero_copy_only=False) * f))
        flat = pa.array(self.flat * np.repeat(f, self.lengths), from_pandas=True)
        samples = pa.ListArray.from_arrays(self.offsets, flat)
        return t.set_column(t.schema.get_field_index("samples"), "samples", samples)


def make_year(dest: Path, nights: int = 365, figures: int = 150, seed: int = 0) -> Year:
    """``nights`` nights (20 or more: room for every event) of ``figures`` figures under ``dest`` (a directory of
    runs); what they hold."""
    assert nights >= 20, "the events of a year need 20 nights or more"
    df, base = template(figures)
    rng = np.random.default_rng(seed)
    plan = _Plan(nights)
    year = Year(dest, keys=list(zip(*(df[k] for k in KEY))), recovering=0, accepting=len(df) // 2,
                opening=len(df) // 3)
    dest.mkdir(parents=True)
    table = _Table(df, dest / ".template.parquet")
    for i in range(nights):
        rid = run_id(i)
        path = dest / rid
        path.mkdir()
        pq.write_table(table.night(rid, _factors(df, i, year, plan, rng)), path / "nightly.parquet")
        (path / results.RUN_FILE).write_text(json.dumps(_meta(base, i, plan)))
        year.run_ids.append(rid)
        if i >= 3:  # the first nights fill the window; from the fourth on the gate judges
            worse = _worse_of(i, df, year, plan)
            _record(path, i, worse)
            year.judged.add(rid)
            year.worse[rid] = {tuple(w[k] for k in KEY) for w in worse}
    first, count = plan.accepted
    reason = "driver 580 trades bandwidth for power (TICKET-123)"
    _accept(dest / run_id(first + count - 1), first + count - 1, year.keys[year.accepting], first, reason)
    year.accepted[run_id(first + count - 1)] = (year.keys[year.accepting], reason)
    first, count = plan.recovers
    year.recovered[run_id(first + count)] = year.keys[year.recovering]
    year.changed = {run_id(i): what for i, what in plan.changes.items()}
    year.hollow = {run_id(i): why for i, why in plan.hollow.items()}
    return year


COMM = ROOT / "results" / "reference" / "h200x2" / "comm-20261123" / "20261123T105720Z-596b71"


def _suite_rows(run: Path, suite: str, pattern: str = "") -> pd.DataFrame:
    df = results.load(run)
    df.attrs = {}
    keep = (df["suite"] == suite) & (df["status"] == "ok") & df["value"].notna() & df["case"].str.contains(pattern)
    return df[keep].reset_index(drop=True)


def shared_run_id(i: int) -> str:
    return f"{(START + timedelta(hours=12 * i)):%Y%m%dT%H%M%SZ}-{i:06x}"


def make_shared(dest: Path, runs: int = 12, env: dict[int, tuple[str, str]] | None = None,
                driver_from: int | None = None, seed: int = 0) -> dict[str, str]:
    """``runs`` runs of one machine under ``dest``, two a day, as two nightlies sharing one --out write them: the
    even ones ``--suite elementwise`` (8 of the template's figures), the odd ones ``--suite comm`` (an H200
    pair's all_gather and all_reduce, in place and out of place). ``env``: run index -> an NCCL variable the comm
    runs set from that run on; ``driver_from``: the run from which every run has another driver (another system).
    Returns run_id -> suite."""
    rng = np.random.default_rng(seed)
    elementwise = _suite_rows(TEMPLATE, "elementwise")
    elementwise = elementwise.iloc[np.linspace(0, len(elementwise) - 1, 8).round().astype(int)].reset_index(drop=True)
    dest.mkdir(parents=True)
    tables = {"elementwise": _Table(elementwise, dest / ".e.parquet"),
              "comm": _Table(_suite_rows(COMM, "comm", "collective=all_(?:gather|reduce),"), dest / ".c.parquet")}
    base = json.loads((TEMPLATE / results.RUN_FILE).read_text())
    out = {}
    for i in range(runs):
        suite, rid = ("elementwise", "comm")[i % 2], shared_run_id(i)
        meta = copy.deepcopy(base)
        when = START + timedelta(hours=12 * i)
        meta.update(run_id=rid, start_time=when.isoformat(), end_time=(when + timedelta(minutes=3)).isoformat(),
                    status="complete", argv=["gpubench", "run", "--suite", suite, "--quick", "--out", "results"])
        if suite == "comm":
            meta["fingerprint"]["volatile"]["env"] = {k: v for at, (k, v) in sorted((env or {}).items()) if i >= at}
        if driver_from is not None and i >= driver_from:
            meta["fingerprint"]["identity"]["driver_version"] = "999.1"
        path = dest / rid
        path.mkdir()
        table = tables[suite]
        pq.write_table(table.night(rid, 1.0 + rng.normal(0.0, 0.004, len(table.lengths))), path / "nightly.parquet")
        (path / results.RUN_FILE).write_text(json.dumps(meta))
        out[rid] = suite
    return out


def embedded(page: Path) -> dict:
    """The document the page draws, as its script reads it."""
    text = page.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="history-data">(.*?)</script>', text, re.S)
    return json.loads(m.group(1).replace("<\\/", "</"))


def red(doc: dict) -> set[tuple[str, tuple]]:
    return {(doc["nights"][m["night"]]["run_id"], tuple(f[k] for k in KEY)) for f in doc["figures"]
            for m in f["worse"]}


def recorded_worse(directory: Path) -> set[tuple[str, tuple]]:
    """(run_id, figure) of every WORSE the gate recorded in the directory, read through compare's memory."""
    out = set()
    for rid, path, _, _ in scan(directory):
        for w in (memory.recorded(path) or {}).get("worse") or []:
            out.add((rid, memory.key_of(w)))
    return out


__all__ = ["make_year", "make_shared", "shared_run_id", "Year", "run_id", "TEMPLATE", "COMM", "embedded", "red",
           "recorded_worse"]
