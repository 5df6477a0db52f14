"""The result-table schema: the one place that knows its columns and its version.

A run is a directory ``<out>/<cluster>/<run_id>/`` holding ``run.json`` (who ran what, where, when: see
:mod:`gpubench.results.rundir`) and one parquet table per suite. Tables are in long format: one row per
(case, metric), with the case's parameters as columns and the raw samples kept beside the stats derived
from them.

Public API: :func:`load` (a run directory or one table file → DataFrame) and :func:`save` (DataFrame →
file that ``load`` reads back unchanged).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from gpubench.errors import UsageError
from gpubench.files import share

SCHEMA_VERSION = 7
# History of SCHEMA_VERSION (bump it for any change a reader could notice; add an upgrade step below):
#   1 — gpubench 0.1.0: first version. Long format, one row per (case, metric); columns in
#       COLUMNS below plus each suite's parameter columns; `value` is the median of `samples`; run.json
#       beside the tables holds the fingerprint.
#   2 — `gpu_uuid` and `pci_bus_id` after `device_index`, so that a run over many GPUs
#       (`run --devices`) names each one; older tables read them as missing.
#   3 — `host_us` and `host_bound` after `sets`: the host's time to issue one call, and whether
#       the device waited for it (the figure is the host's issue rate); older tables read them as unknown.
#   4 — `contended` after `throttle`: other processes seen on the device around the case ("pid
#       4321 (python3)"; "" none, None unknown); older tables read it as unknown.
#   5 — `processes` and `sample_process` after `samples` (a figure whose level is set per process is
#       measured in several processes; each sample's process), and `host_load` after `contended` (CPUs other
#       processes used while the case ran). Older tables were measured in one process (`processes` 1, no
#       labels) and read `host_load` as unknown.
#   6 — `case_s` after `stop`: the seconds the case took, its inputs, warm-up, samples and check, summed
#       over the processes that measured it (what the figure cost the run); older tables read it as unknown.
#   7 — `host_pace` after `sample_process`: for samples the host times, the host's pace taken before each
#       (µs for gpubench.machine.host_pace's fixed work), so compare can judge them at the baseline's pace; older tables read
#       it as empty (not taken).

META_KEY = b"gpubench"  # parquet footer key holding {"schema_version": ..., "suite": ..., ...}
RUN_FILE = "run.json"
TABLE_SUFFIX = ".parquet"

# Columns every table has, in order; a suite's parameter columns go between HEAD and the rest.
HEAD = ("run_id", "suite", "suite_version", "case")
STATS = ("mean", "min", "max", "stdev", "iqr", "cv")  # of the samples, beside their median (`value`)
BODY = (
    "metric",  # e.g. time, bandwidth, throughput, busbw
    "unit",  # e.g. us, GB/s, TFLOP/s
    "better",  # "higher" | "lower": which direction is an improvement
    "value",  # median of samples
    *STATS,  # stdev: the sample standard deviation (n-1); cv: stdev / mean
    "n",  # number of samples
    "samples",  # raw per-sample values in `unit` (each a batch of `inner` calls, divided by inner)
    "processes",  # processes whose samples are pooled here (1: this run's own; more: see gpubench.run.per_process)
    "sample_process",  # the process (0 = the run's own) each sample came from; empty where processes is 1
    "host_pace",  # host-timed, paced and derived-from-them samples: the host's pace (µs, gpubench.machine.host_pace); [] if none
    "noisy",  # cv above the engine's target
    "status",  # ok | invalid (failed its correctness check) | error (raised) | skipped
    "message",  # why, for anything but ok
    "backend",
    "device",  # model name, e.g. "NVIDIA H200"
    "device_index",
    "gpu_uuid",  # NVML/amdsmi UUID of the device; None where unreadable (CPU, no NVML)
    "pci_bus_id",
    "host",
    "cluster",
    "work_bytes",  # bytes one call moves, as the suite counts them
    "work_flops",
    "inner",  # calls per sample
    "sets",  # rotating input sets
    "host_us",  # the host's time to issue one call (median; None where the engine does not measure it)
    "host_bound",  # host_us >= engine.HOST_BOUND x the per-call time: the device waited for the host
    "warmup_s",
    "settled",  # warm-up ended because times agreed (not because its time ran out)
    "stop",  # cv | budget | max_samples | check
    "case_s",  # wall seconds the case took (inputs, warm-up, samples, check), summed over its processes; None derived
    "check_error",
    "check_tolerance",
    "sm_clock_mhz",  # median during sampling; NaN where unreadable
    "mem_clock_mhz",
    "power_w",
    "temp_c",  # max during sampling
    "throttle",  # union of clock-event/throttle reasons seen, comma-separated
    "contended",  # other processes on the device around the case, named; "" none seen, None unknown
    "host_load",  # CPUs that processes outside the run kept busy while the case ran; None unknown
)
COLUMNS = HEAD + BODY
STATUSES = ("ok", "invalid", "error", "skipped")


class SchemaError(UsageError):
    """A table gpubench cannot read: newer schema, missing version, not a gpubench table."""


def _v1_to_v2(df: pd.DataFrame) -> pd.DataFrame:
    # A v1 table came from one device per run; which one, beyond its index, was not recorded.
    for col in ("gpu_uuid", "pci_bus_id"):
        if col not in df.columns:
            df[col] = None
    return df


def _v2_to_v3(df: pd.DataFrame) -> pd.DataFrame:
    # Before v3 the host's issue time was not measured: unknown, not "not host-bound".
    for col in ("host_us", "host_bound"):
        if col not in df.columns:
            df[col] = None
    return df


def _v3_to_v4(df: pd.DataFrame) -> pd.DataFrame:
    # Before v4 nobody looked for other processes on the device: unknown, not "alone".
    if "contended" not in df.columns:
        df["contended"] = None
    return df


def _v4_to_v5(df: pd.DataFrame) -> pd.DataFrame:
    # Before v5 every figure came from the run's own process; nobody measured the host's load per case.
    if "processes" not in df.columns:
        df["processes"] = 1
    if "sample_process" not in df.columns:
        df["sample_process"] = [[] for _ in range(len(df))]
    if "host_load" not in df.columns:
        df["host_load"] = None
    return df


def _v5_to_v6(df: pd.DataFrame) -> pd.DataFrame:
    # Before v6 no case's own time was kept: unknown.
    if "case_s" not in df.columns:
        df["case_s"] = None
    return df


def _v6_to_v7(df: pd.DataFrame) -> pd.DataFrame:
    # Before v7 no sample carried the host's pace: not taken, so compare judges those figures as measured.
    if "host_pace" not in df.columns:
        df["host_pace"] = [[] for _ in range(len(df))]
    return df


# Upgrade steps: _UPGRADES[v] turns a version-v frame into a version-(v+1) frame; the loader applies them in
# order, so a change to the schema is one function here.
_UPGRADES: dict[int, Callable[[pd.DataFrame], pd.DataFrame]] = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4,
                                                                 4: _v4_to_v5, 5: _v5_to_v6, 6: _v6_to_v7}


def frame(rows: Iterable[Mapping[str, Any]], params: Sequence[str] = ()) -> pd.DataFrame:
    """Rows (dicts) → a DataFrame with the schema's column order: HEAD, parameters, BODY, then extras."""
    df = pd.DataFrame(list(rows))
    for c in COLUMNS:
        if c not in df.columns:
            df[c] = None
    # A row that says nothing of processes was measured in the run's own process alone.
    df["processes"] = [1 if p is None or (isinstance(p, float) and math.isnan(p)) else int(p) for p in df["processes"]]
    for col in ("sample_process", "host_pace"):
        df[col] = [as_list(x) for x in df[col]]
    schema = [c for c in dict.fromkeys((*HEAD, *params, *BODY)) if c in df.columns]
    return df[schema + [c for c in df.columns if c not in schema]]


def as_list(x: Any) -> list:
    """A list column's cell (``samples``, ``sample_process``, ``host_pace``) as a list: a table read back holds
    arrays (kept, not emptied); None or NaN is empty."""
    if isinstance(x, (list, tuple)):
        return list(x)
    return x.tolist() if getattr(x, "ndim", 0) == 1 else []


def save(df: pd.DataFrame, path: str | os.PathLike, *, suite: str | None = None) -> Path:
    """Write ``df`` as a parquet table with the schema version in its footer.

    The file appears whole or not at all (written beside, then renamed), so a crash never leaves a
    truncated table.
    """
    path = Path(path)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"not a gpubench table: missing columns {missing}")
    table = pa.Table.from_pandas(df, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    suites = sorted({str(s) for s in df["suite"].dropna().unique()})
    meta[META_KEY] = json.dumps(
        {"schema_version": SCHEMA_VERSION, "suite": suite or (suites[0] if len(suites) == 1 else None)}
    ).encode()
    table = table.replace_schema_metadata(meta)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        share(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _version_of(meta: Mapping[bytes, bytes] | None, where: Path) -> int:
    if not meta or META_KEY not in meta:
        raise SchemaError(f"{where} is not a gpubench result table (no schema version in its metadata)")
    try:
        return int(json.loads(meta[META_KEY])["schema_version"])
    except (ValueError, KeyError, TypeError) as e:
        raise SchemaError(f"{where}: unreadable gpubench metadata ({e})") from e


def check_version(version: int, where: Path | str) -> None:
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"{where} has result schema {version}, newer than this gpubench reads ({SCHEMA_VERSION}): "
            "upgrade gpubench: in its checkout, git pull && pip install ."
        )
    if version < 1:
        raise SchemaError(f"{where}: invalid result schema version {version}")


def upgrade(df: pd.DataFrame, version: int) -> pd.DataFrame:
    """Apply the upgrade steps from ``version`` to SCHEMA_VERSION, in order."""
    while version < SCHEMA_VERSION:
        step = _UPGRADES.get(version)
        if step is None:
            raise SchemaError(f"no upgrade from result schema {version} to {version + 1}")
        df = step(df)
        version += 1
    return df


def _normalize(df: pd.DataFrame) -> pd.DataFrame:
    # parquet gives list columns back as numpy arrays; tables hold plain lists of floats, as written.
    if "samples" in df.columns:
        df["samples"] = [list(map(float, s)) if s is not None else [] for s in df["samples"]]
    if "sample_process" in df.columns:
        df["sample_process"] = [list(map(int, s)) if s is not None else [] for s in df["sample_process"]]
    return df


def _read_whole(path: Path) -> pa.Table:
    """The table as one open file saw it.

    A runner rewrites a live run's tables (written beside, then renamed over: :func:`save`). Given a path,
    pyarrow opens the file more than once (footer, then pages); a rename between two opens pairs one
    version's footer with another's pages, a torn read. One handle keeps the version it opened, whole, even
    after a newer one replaced its name. Arrow's own handle, not a Python file object: Arrow reads from its IO
    threads, and a Python object read from there needs the GIL, which at interpreter exit aborted a process
    ("terminate called without an active exception", apache/arrow#34314; how often: docs/measurements.md, 'Faults').
    """
    with pa.OSFile(str(path), "rb") as f:
        return pq.read_table(f)


def load_table(path: str | os.PathLike) -> pd.DataFrame:
    path = Path(path)
    try:
        table = _read_whole(path)
    except (OSError, pa.ArrowInvalid) as e:
        raise SchemaError(f"cannot read {path} as a parquet table: {e}") from e
    version = _version_of(table.schema.metadata, path)
    check_version(version, path)
    df = _normalize(table.to_pandas())
    df = upgrade(df, version)
    df.attrs["schema_version"] = SCHEMA_VERSION
    return df


def read_columns(path: str | os.PathLike, columns: Sequence[str]) -> pa.Table:
    """``columns`` of a run directory's tables (or of one table) as one Arrow table, each table's schema version
    checked as :func:`load` checks it: for readers of many runs (a year of nights is 365 of them), which need a
    few columns and would spend most of their time making a DataFrame of each run. A column a table lacks is
    null in its rows; the upgrade steps, which work on DataFrames, are not applied, so ask for columns whose
    absence means unknown (every column of schema 1 is in every table)."""
    path = Path(path)
    tables = [path] if path.is_file() else sorted(path.glob(f"*{TABLE_SUFFIX}"))
    read = []
    for t in tables:
        try:
            with pa.OSFile(str(t), "rb") as f:  # one handle: see _read_whole
                pf = pq.ParquetFile(f)
                schema = pf.schema_arrow  # a property that builds the schema anew on each read
                check_version(_version_of(schema.metadata, t), t)
                read.append(pf.read(columns=[c for c in columns if c in set(schema.names)]))
        except (OSError, pa.ArrowInvalid) as e:
            raise SchemaError(f"cannot read {t} as a parquet table: {e}") from e
    out = []
    for table in read:
        for c in columns:
            if c not in table.column_names:
                table = table.append_column(c, pa.nulls(len(table)))
        out.append(table.select(list(columns)).replace_schema_metadata(None))
    return pa.concat_tables(out, promote_options="permissive") if out else \
        pa.table({c: pa.nulls(0) for c in columns})


def read_run_meta(run_dir: str | os.PathLike) -> dict[str, Any]:
    path = Path(run_dir) / RUN_FILE
    try:
        text = path.read_text()
    except OSError as e:
        raise SchemaError(f"cannot read {path}: {e.strerror or e}") from e
    try:
        meta = json.loads(text)
    except ValueError as e:
        raise SchemaError(f"{path} is not whole JSON ({e}): it was cut short or damaged (a crash mid-write, a full "
                          "disk); restore it from a copy, or move its run directory out of the way") from e
    if not isinstance(meta, dict):
        raise SchemaError(f"{path} holds no run description (a JSON object): move its run directory out of the way")
    check_version(int(meta.get("schema_version", 0)), path)
    return meta


def no_complete_run(directory: str | os.PathLike, runs: Sequence[tuple[str, Path, Any, str]], shown: int = 3) -> str:
    """Why ``directory`` offered no complete run, each of its ``runs`` (run_id, path, run.json, status: as a scan of
    it lists them) named with what to do: a run.json that cannot be read says why, as it does pointed at alone."""
    said = [why_not_complete(path, status) for _, path, _, status in runs]
    if not said:
        return (f"{directory} holds no complete run directory: give a run directory or a directory of runs written "
                "by gpubench run")
    more = f"; {len(said) - shown} more runs are not complete either" if len(said) > shown else ""
    return f"{directory} holds no complete run directory: {'; '.join(said[:shown])}{more}"


def why_not_complete(path: str | os.PathLike, status: str) -> str:
    """Why the run at ``path`` (its ``status`` as a scan of its directory found it) is not a complete run, naming
    it by its path: ``results/lab/RUN is interrupted, not complete (its tables may be partial)``."""
    if status == "unreadable":
        try:
            read_run_meta(Path(path))
            return f"{path}'s {RUN_FILE} could not be read"
        except UsageError as e:
            return str(e)
    return f"{path} is {status}, not complete (its tables may be partial)"


def load(path: str | os.PathLike) -> pd.DataFrame:
    """A run directory (all its suite tables, ``run.json`` in ``attrs["run"]``) or one table file."""
    path = Path(path)
    if path.is_file():
        return load_table(path)
    if not path.is_dir():
        raise SchemaError(f"{path} does not exist: give a run directory or a {TABLE_SUFFIX} table")
    tables = sorted(path.glob(f"*{TABLE_SUFFIX}"))
    if not tables and not (path / RUN_FILE).exists():
        raise SchemaError(f"{path} is not a gpubench run directory (no {RUN_FILE}, no {TABLE_SUFFIX} tables)")
    meta = read_run_meta(path) if (path / RUN_FILE).exists() else {}
    frames = [load_table(t) for t in tables]
    df = pd.concat(frames, ignore_index=True) if frames else frame([])
    df.attrs["schema_version"] = SCHEMA_VERSION
    df.attrs["run"] = meta
    return df


__all__ = ["SCHEMA_VERSION", "COLUMNS", "STATUSES", "SchemaError", "frame", "as_list", "save", "load",
           "load_table", "read_columns", "upgrade"]
