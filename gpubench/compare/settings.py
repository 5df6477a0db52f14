"""Software and settings that differ between the two sides of a comparison, to show next to the verdicts.

A gate compares runs of one system across software changes on purpose (see :mod:`gpubench.compare.cross`), so
these differences never refuse a comparison; they explain one. When a figure got WORSE the first question is
what changed: an NCCL upgrade, a new torch, ``NCCL_P2P_DIRECT_DISABLE=1`` left set in a job script, another
gpubench (whose method may differ). Each difference reads ``name: baseline → current``.

Sources, per run: run.json's ``gpubench_version`` and command line (its options); the fingerprint identity's
software facts; the NCCL_*/RCCL_*
and device-selection variables of ``fingerprint.volatile.env``; and how the comm rows were measured (their
``graph``, ``alloc`` and ``register`` columns: a ``--register`` run against a default one says so). A fact one
side does not know (a bare table, an imported log that carries no such fact) is left out rather than shown as a
change. An imported text log carries no environment, so an imported run's empty ``env`` counts as unknown; a
measured run's empty ``env`` means none was set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpubench.compare import cross
from gpubench.machine.fingerprint import NOT_SETTINGS

if TYPE_CHECKING:
    import pandas as pd

    from gpubench.compare.cross import SideRuns

# Identity facts that are software, in the order they are shown (runtime_version is the CUDA/HIP runtime), and
# the run's own options ("run options": its command line, less where it wrote and which cases it picked).
OPTIONS = "run options"
# Where the processes that measure the figures set per process ran (run.json's processes.pinning; GPUBENCH_PIN).
PINNING = "pinning"
SOFTWARE_KEYS = ("gpubench", "tool", "tool_version", "collective_lib", "nccl", "torch", "triton", "runtime_version",
                 "python", "os", OPTIONS, PINNING)
# Command-line options of `gpubench run` that say where a run went or which of its cases ran, not how: a
# nightly's confirmation rerun (--filter) measures its cases as the night did.
_NOT_HOW = ("--out", "--cluster", "--filter")


def run_options(argv: object) -> str | None:
    """``--suite elementwise,gemm --quick --triton-warps 1``: a run's command line as it bears on how it measured
    (None where run.json has none)."""
    if not isinstance(argv, list) or not argv:
        return None
    words = [str(w) for w in argv]
    if len(words) >= 2 and words[1] == "run":
        words = words[2:]
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
            continue
        if w in _NOT_HOW:
            skip = True
            continue
        if any(w.startswith(f"{flag}=") for flag in _NOT_HOW):
            continue
        out.append(w)
    return " ".join(out)


def pinning_text(pinning: object) -> str | None:
    """``core (CPU 17)``, ``node (CPUs 16-31)``, ``off``; None where run.json does not say (older runs)."""
    if not isinstance(pinning, dict) or not pinning.get("mode"):
        return None
    cpus = sorted(int(c) for c in pinning.get("cpus") or [])
    if not cpus:
        return str(pinning["mode"])
    span = str(cpus[0]) if len(cpus) == 1 else (f"{cpus[0]}-{cpus[-1]}" if cpus == list(range(cpus[0], cpus[-1] + 1))
                                                else ",".join(map(str, cpus)))
    return f"{pinning['mode']} (CPU{'s' if len(cpus) > 1 else ''} {span})"


UNSET = "unset"
MIXED = "mixed"
# Row columns that say how a figure was measured (the comm suite's options), in the order they are shown.
# How a row was measured, beside what it measured: comm's graphs, buffers and how its ranks were laid out (one
# process or thread per GPU, or one thread driving several: nccl-tests' -g N reads less at small sizes).
METHOD_COLUMNS = ("graph", "alloc", "register", "layout")


def _of_run(meta: dict[str, Any]) -> tuple[dict[str, str], dict[str, str] | None]:
    """(software facts known, env or None where unknown) of one run.json."""
    fp = meta.get("fingerprint") or {}
    identity = fp.get("identity") or {}
    volatile = fp.get("volatile") or {}
    facts = {k: meta.get("gpubench_version") if k == "gpubench" else identity.get(k) for k in SOFTWARE_KEYS}
    facts[OPTIONS] = run_options(meta.get("argv"))
    facts[PINNING] = pinning_text((meta.get("processes") or {}).get("pinning"))
    if not volatile.get("imported") and not facts["tool"]:
        facts["tool"] = "gpubench"  # measured by gpubench itself, against an import's nccl-tests
    software = {k: str(v) for k, v in facts.items() if v not in (None, "")}
    env = volatile.get("env")
    if not isinstance(env, dict) or (not env and volatile.get("imported")):
        return software, None
    return software, {str(k): str(v) for k, v in env.items() if k not in NOT_SETTINGS}


def _merge(values: list[str]) -> str:
    """One value for a side whose runs may disagree (a pooled baseline window)."""
    distinct = sorted(set(values))
    return distinct[0] if len(distinct) == 1 else f"{MIXED} ({', '.join(distinct)})"


@dataclass
class Settings:
    software: dict[str, str] = field(default_factory=dict)  # facts every run of the side knows
    env: dict[str, str] | None = None  # None: some run's environment is unknown
    method: dict[str, str] = field(default_factory=dict)  # METHOD_COLUMNS some row of the side knows


def named_by_case(col: str) -> str:
    """The pattern of a case id that names ``col`` (``layout=NT`` in gemm's): there the column is what the case
    is, not how it was measured, and is no method setting. Compare and the history page both read it so."""
    return rf"(?:^|,){col}="


def _method(raw: pd.DataFrame | None) -> dict[str, str]:
    """The METHOD_COLUMNS of a side's rows. Rows without one (a case skipped before it was prepared, an older
    run, an import whose log does not tell it) do not know it: they are left out, and a side where no row
    knows it shows nothing."""
    out = {}
    for col in METHOD_COLUMNS:
        if raw is None or col not in raw.columns:
            continue
        known = raw[col]
        if "case" in raw.columns:  # a column the case id names is what the case is (gemm's layout), not how
            known = known[~raw["case"].astype(str).str.contains(named_by_case(col), regex=True)]
        known = known.dropna()
        if len(known):
            out[col] = _merge([str(v) for v in known])
    return out


def of_side(side: SideRuns) -> Settings:
    """The settings of a side's runs; where they disagree (a pooled window), ``mixed (a, b)``. A software fact is
    kept only when every run knows it; the environment only when every run's is known, a variable some runs did
    not set counting as ``unset`` there."""
    runs = [_of_run(m) for m in side.runs]
    method = _method(getattr(side, "raw", None))
    if not runs:
        return Settings(method=method)
    software = {}
    for key in SOFTWARE_KEYS:
        values = [known.get(key) for known, _ in runs]
        if all(v is not None for v in values):
            software[key] = _merge(values)
    envs = [env for _, env in runs]
    if any(env is None for env in envs):
        return Settings(software, None, method)
    names = sorted({n for env in envs for n in env})
    return Settings(software, {n: _merge([env.get(n, UNSET) for env in envs]) for n in names}, method)


def differences(baseline: Settings, current: Settings) -> list[str]:
    """``name: baseline → current`` for each setting that differs and that both sides know (software in
    SOFTWARE_KEYS order, then variables by name, then METHOD_COLUMNS), worded as :func:`cross.differences`
    words system facts."""
    out = cross.differences(baseline.software, current.software)
    if baseline.env is not None and current.env is not None:
        names = sorted({*baseline.env, *current.env})
        out += cross.differences({n: baseline.env.get(n, UNSET) for n in names},
                                 {n: current.env.get(n, UNSET) for n in names})
    return out + cross.differences(baseline.method, current.method)


__all__ = ["pinning_text", "SOFTWARE_KEYS", "METHOD_COLUMNS", "Settings", "named_by_case", "of_side", "differences",
           "run_options"]
