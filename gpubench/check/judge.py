"""A figure's verdict: against its envelope (or the spec fallback) and against its peers, with confidence.

For a figure where higher is better (a time mirrors every rule):

- **Absolute.** Below ``fail_at`` beyond its own noise — the upper end of the 95 % interval of its median, from its
  samples, is still below — it is a FAIL candidate; below ``warn_at`` beyond its own noise it is a WARN (a median
  below ``fail_at`` whose interval reaches above ``warn_at`` is noise, not news: a PASS). The envelope's margins are
  themselves several times the figure's spread between runs (gpubench/check/envelope.py), so a WARN is beyond both
  the figure's noise within the run and between runs.
- **Peers.** Its peers are the same figure on the node's other GPUs (or pairs), and with ``--fleet`` other nodes':
  their median, leaving the figure itself out, so that one slow GPU of four is set against the three others and
  a good GPU against a median the slow one cannot move. Worse than that median by more than ``PEER_FAIL`` beyond
  noise is a FAIL candidate (gpu-fryer holds a GPU to within 10 % of the node's best); by more than ``PEER_WARN``
  a WARN (SuperBench: 5 % of the fleet mean).
- **Retry.** A FAIL candidate is measured again in a fresh process; it FAILs only if the retry is a FAIL candidate
  too, beyond its own noise (a retry that reaches the thresholds makes it a PASS with a note: Azure's health check
  passes a node if any repeat reaches its floor; one between the lines a WARN). A WARN on a figure the host sets is
  retried the same way, since its level moves from one process to the next: it stays a WARN unless the retry
  reaches the thresholds.
- **Not idle.** A figure measured while another process used the GPU (or, for a figure the host sets, while
  others kept the host busy) is never a FAIL: what would fail is a WARN naming the process.
- **The host's figures.** A figure the host sets is held to an envelope only where that envelope was measured on
  the same class of host (and, for a total over every GPU, on as many GPUs): gpubench.check.envelope.unheld.
- **The host's pace.** A figure the host times, where its envelope entry holds a line of it on the host's pace, is
  first moved along that line from the pace its host ran at to the entry's (no further than the paces the entry was
  made at), and so is its retry; the verdict keeps the figure as measured and the pace.
- **Nothing to hold it against** (no envelope, no spec roof, no peer) is a SKIP that says so, never a PASS.

``confidence`` is the share of bootstrap resamples of the median that fall on the decided side of the threshold
that decided the state (for a PASS, the nearest one).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from gpubench.timing import pace_line as paceline
from gpubench.check.checkset import Evidence
from gpubench.check.envelope import Envelope, Thresholds, thresholds, unheld
from gpubench.check.verdicts import Verdict
from gpubench.results.host_set import disturbed_by_load, set_by_host
from gpubench.console import fmt_value as format_value
from gpubench.console import unit_text

PEER_WARN, PEER_FAIL = 0.05, 0.10
# Figures the host sets (gpubench.results.host_set) differ between a node's GPUs by where its processes landed, not by
# the GPUs (docs/measurements.md, 'check'): held to their envelope (or spec) only, their peers' median kept as evidence.
SHARED_NOTE = "measured while"
BUSY_HOST = 0.5  # the share of the host's CPUs others used at which a host-set figure is not judged
_RESAMPLES = 2000
_PID = re.compile(r"pid (\d+)(?: \(([^)]*)\))?")


def interval(samples: list[float]) -> tuple[float, float] | None:
    """95 % percentile-bootstrap interval of the median (fixed seed: the same samples, the same verdict)."""
    if len(samples) < 3:
        return None
    draws = _medians(samples)
    return float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def _medians(samples: list[float]) -> np.ndarray:
    x = np.asarray(samples, dtype=float)
    rng = np.random.default_rng(0)
    return np.median(x[rng.integers(0, len(x), size=(_RESAMPLES, len(x)))], axis=1)


def _share_beyond(samples: list[float], threshold: float, sign: int) -> float | None:
    """Share of resampled medians on the good side of ``threshold`` (sign +1: above is good; -1: below is good)."""
    if len(samples) < 3:
        return None
    return float(np.mean(sign * (_medians(samples) - threshold) >= 0))


def shared_with(row: dict[str, Any] | None, foreign: dict[int, str] | None = None) -> str:
    """Who else used the GPU (or the host, for a figure the host sets) while the figure was measured, as words that
    follow "while": "the GPU was shared with pid 4242 (python3)"; "" none. ``foreign``: {pid: "pid N (name)"} the
    facts watch saw on the figure's GPU."""
    row = row or {}
    contended = str(row.get("contended") or "")
    if contended:  # the rows say more ("pid 1144 (python3), device 100% busy before the run"): the pids suffice
        named = pids_in(contended)
        who = ", ".join(f"pid {p} ({n})" if n else f"pid {p}" for p, n in list(named.items())[:3]) or contended
        return f"the GPU was shared with {who}"
    if foreign:
        return "the GPU was shared with " + ", ".join(list(foreign.values())[:3])
    load = row.get("host_load")
    if isinstance(load, (int, float)) and math.isfinite(load) and load >= BUSY_HOST and disturbed_by_load(row):
        return f"other processes kept {load:.0%} of the host's CPUs busy"
    return ""


def pids_in(text: str) -> dict[int, str]:
    return {int(m.group(1)): m.group(2) or "" for m in _PID.finditer(text or "")}


Retried = Evidence | float | None


class Judge:
    """Judges every figure of a node. ``retry(ev)`` measures ``ev`` again in a fresh process (its evidence, or its
    figure alone; None: it could not); ``fleet`` maps a check key to figures of other nodes' GPUs of the same
    model, extra peers; ``host`` is the node's host class and ``gpus`` how many GPUs the check measured at once."""

    def __init__(self, envelope: Envelope | None, retry: Callable[[Evidence], Retried] | None = None,
                 fleet: dict[str, list[float]] | None = None, links: dict[int, float | None] | None = None,
                 foreign: dict[int, dict[int, str]] | None = None, host: str | None = None, gpus: int | None = None):
        self.envelope, self.retry, self.fleet = envelope, retry, fleet or {}
        self.links, self.foreign = links or {}, foreign or {}
        self.host, self.gpus = host, gpus

    def all(self, evidence: list[Evidence]) -> list[Verdict]:
        by_key: dict[str, list[Evidence]] = {}
        for ev in evidence:
            by_key.setdefault(ev.figure.key, []).append(ev)
        out = []
        for key, evs in by_key.items():
            for ev in evs:
                out.append(self.one(ev, [o for o in evs if o is not ev]))
        return out

    def one(self, ev: Evidence, others: list[Evidence]) -> Verdict:
        v = _base(ev)
        if ev.row is None or ev.row.get("status") != "ok":
            return _not_measured(v, ev)
        shared = shared_with(ev.row, self._foreign_on(ev))
        key, link = ev.figure.key, self.links.get(ev.gpu) if ev.gpu is not None else None
        th = thresholds(key, ev.row, self.envelope, link, self.host, self.gpus)
        refused = unheld(key, ev.row, self.envelope, self.host, self.gpus)
        if refused:
            v.notes.append(f"not held to the envelope: {refused}")
        peers = [o.value for o in others if o.row is not None and o.row.get("status") == "ok"
                 and not shared_with(o.row, self._foreign_on(o)) and math.isfinite(o.value)]
        peers += list(self.fleet.get(key, []))
        host = bool(set_by_host(ev.row))
        if th is None and (host or not peers):
            why = refused or (f"the host sets this figure, and no envelope holds it for {ev.row.get('device')}" if host
                              else f"nothing to hold it against (no envelope for {ev.row.get('device')}, no spec "
                                   "roof, no peer GPU)")
            _fill(v, None, peers)
            v.state, v.text = "SKIP", f"{_fmt(v)}: {why}: give --expect FILE or history (gpubench expect)"
            return v
        _fill(v, th, peers)
        line = th.line if th is not None and host else None
        samples = _at_pace(v, ev, line)
        state, why, decisive = _decide(v, samples, None if host else (PEER_WARN, PEER_FAIL),
                                       th.ceiling if th is not None else None)
        if decisive is not None:  # how many resamples agree with what the figure was found to be
            v.confidence = _share_beyond(samples, decisive, -_sign(v) if state != "PASS" else _sign(v))
        if shared:
            v.notes.append(f"{SHARED_NOTE} {shared}")  # other nodes' checks do not take it for a peer (--fleet)
        if state == "FAIL" and shared:
            state, why = "WARN", f"{why}, while {shared}: not judged"
        elif state == "WARN" and shared:  # the line people read names who else was there, as a FAIL's does
            why = f"{why}, while {shared}"
        elif self.retry is not None and (state == "FAIL" or state == "WARN" and host and not shared):
            # A figure the host sets reads another level in another process (the host's moment, beyond what its
            # pace explains): a WARN on it is measured again in a fresh process too, as a FAIL is
            state, why = self._retried(v, ev, why, line, state)
        v.state, v.text = state, why
        return v

    def _foreign_on(self, ev: Evidence) -> dict[int, str]:
        """Other processes the facts watch saw on the GPUs a figure involves: its GPU, both GPUs of a pair, every
        GPU for a node-wide figure (a collective runs at the pace of its slowest GPU)."""
        gpus = [ev.gpu] if ev.gpu is not None else list(ev.pair) if ev.pair else list(self.foreign)
        return {p: n for g in gpus for p, n in (self.foreign.get(g) or {}).items()}

    def _retried(self, v: Verdict, ev: Evidence, why: str, line: paceline.Line | None,
                 first: str = "FAIL") -> tuple[str, str]:
        """The state after the retry of a figure first found ``first``: never worse than that."""
        got = self.retry(ev)
        again, samples = (got.value, got.samples) if isinstance(got, Evidence) else (got, [])
        if line is not None and isinstance(got, Evidence) and got.pace is not None and math.isfinite(again):
            # held at the envelope's pace like the first figure, from the pace the retry's own process ran at
            factor = line.factor(got.pace, clip=True)
            again, samples = again * factor, [x * factor for x in samples]
        v.retry = again
        if again is None or not math.isfinite(again):
            v.notes.append("the retry in a fresh process could not measure it")
            return first, why
        probe = Verdict(**{**v.as_dict(), "pair": v.pair, "ci": None, "value": again, "notes": []})
        state, _, _ = _decide(probe, samples, None if set_by_host(ev.row) else (PEER_WARN, PEER_FAIL))
        if state == "FAIL" or state == first:
            return first, f"{why} (retry: {format_value(again)})"
        v.notes.append(f"first {format_value(v.value)}, a retry in a fresh process read {format_value(again)}")
        v.confidence = None  # decided by the retry's figure, not by the first one's samples
        if state == "WARN":
            return "WARN", f"{_fmt(v)}: the retry in a fresh process read {format_value(again)}, between the lines"
        return "PASS", f"{_fmt(v)}: the retry in a fresh process reached the thresholds ({format_value(again)})"


def _base(ev: Evidence) -> Verdict:
    row = ev.row or {}
    better = row.get("better")
    return Verdict(check=ev.figure.key, target=ev.target, state="SKIP", text="", kind="performance", gpu=ev.gpu,
                   pair=ev.pair, title=ev.figure.title, value=ev.value if math.isfinite(ev.value) else None,
                   unit=row.get("unit"), better=better, run_dir=ev.run_dir, case=row.get("case"),
                   host_set=set_by_host(ev.row) or None)


def _at_pace(v: Verdict, ev: Evidence, line: paceline.Line | None) -> list[float]:
    """The samples to judge: a host-timed figure whose envelope holds it at a host pace, moved along the envelope's
    line to that pace (no further than the paces the envelope was made at), with ``v`` saying what was measured."""
    samples, pace = ev.samples, ev.pace
    if line is None or pace is None or v.value is None:
        return samples
    factor = line.factor(pace, clip=True)
    v.measured, v.host_pace, v.value = v.value, round(pace, 2), v.value * factor
    v.notes.append(f"judged at the envelope's host pace: measured {format_value(v.measured)}, while the host ran the "
                   f"pace probe in {pace:.0f} µs against the envelope's {line.pace:.0f} µs")
    return [x * factor for x in samples]


def _not_measured(v: Verdict, ev: Evidence) -> Verdict:
    status = (ev.row or {}).get("status")
    if ev.row is None:  # its measuring processes failed, twice (gpubench.check.drive.session): not a pass
        v.state, v.text = "FAIL", f"not measured: {ev.why or 'its measurement ended without results'}"
    elif status == "invalid":  # a wrong result is never excused: not by a co-tenant, not by a retry
        v.state, v.text = "FAIL", f"wrong results: {ev.why}"
    elif status == "error":
        shared = shared_with(ev.row)
        v.state = "WARN" if shared else "FAIL"
        v.text = f"the measurement failed: {ev.why}" + (f" (while {shared})" if shared else "")
    else:
        v.state, v.text = "SKIP", ev.why or "not measured"
    return v


def _fill(v: Verdict, th: Thresholds | None, peers: list[float]) -> None:
    if th is not None:
        v.fail_at, v.warn_at, v.typical, v.reference = th.fail_at, th.warn_at, th.typical, th.reference
    if peers:
        v.peer_median, v.peers = float(np.median(peers)), len(peers)


def _sign(v: Verdict) -> int:
    return 1 if v.better == "higher" else -1


def _worse(v: Verdict, x: float, limit: float) -> bool:
    return (x < limit) if v.better == "higher" else (x > limit)


def _decide(v: Verdict, samples: list[float], bands: tuple[float, float] | None = (PEER_WARN, PEER_FAIL),
            ceiling: float | None = None) -> tuple[str, str, float | None]:
    """(state, text, the threshold that decided it) from the value, its interval and the references in ``v``.
    Every threshold is crossed only beyond noise: by the figure's most favourable end of its interval. A median past
    the floor whose interval still reaches it is a WARN where the interval stays past ``warn_at`` (or there is no
    warn line), else a PASS; one past ``warn_at`` within noise is a PASS."""
    ci = interval(samples)
    v.ci = ci
    value = float(v.value)
    best = value if ci is None else (ci[1] if v.better == "higher" else ci[0])  # the figure's most favourable read
    text = _fmt(v)
    peers = bool(v.peer_median) and bands is not None  # None: the peers' median is evidence, not a reference
    peer_warn, peer_fail = bands or (PEER_WARN, PEER_FAIL)
    if v.fail_at is not None and _worse(v, best, v.fail_at):
        return "FAIL", f"{text}, {_pct_of(v, ceiling)} ({_limit(v, v.fail_at)})", v.fail_at
    if peers:
        limit = v.peer_median * (1 - _sign(v) * peer_fail)
        if _worse(v, best, limit):
            return "FAIL", f"{text}, {_dev(value, v)} {_peers(v)}", limit
    if v.warn_at is not None and _worse(v, best, v.warn_at):
        # Beyond the warn line even at the favourable end of its interval; past the floor, but within noise of it
        if v.fail_at is not None and _worse(v, value, v.fail_at):
            return "WARN", f"{text}, within noise of {_limit(v, v.fail_at)}", v.fail_at
        word = "below" if v.better == "higher" else "above"
        return "WARN", f"{text}, {word} what healthy GPUs read ({_limit(v, v.warn_at, 'warn at')})", v.warn_at
    if v.warn_at is None and v.fail_at is not None and _worse(v, value, v.fail_at):
        # A floor alone (published floors: mi300x.toml): its median past it, its interval reaching back
        return "WARN", f"{text}, within noise of {_limit(v, v.fail_at)}", v.fail_at
    if peers:
        limit = v.peer_median * (1 - _sign(v) * peer_warn)
        if _worse(v, best, limit):
            return "WARN", f"{text}, {_dev(value, v)} {_peers(v)}", limit
    decisive = v.fail_at if v.fail_at is not None else (v.peer_median * (1 - _sign(v) * peer_fail) if peers else None)
    ref = f"{_limit(v, v.fail_at)}" if v.fail_at is not None else _peers(v).removeprefix("its ")
    return "PASS", f"{text} ({ref})", decisive


def _fmt(v: Verdict) -> str:
    return f"{format_value(v.value)} {unit_text(v.unit or '')}".rstrip() if v.value is not None else "no figure"


def _peers(v: Verdict) -> str:
    if v.peers == 1:
        return f"its peer's {format_value(v.peer_median)}"
    return f"its {v.peers} peers' median {format_value(v.peer_median)}"


def _limit(v: Verdict, x: float, word: str | None = None) -> str:
    word = word or ("floor" if v.better == "higher" else "limit")
    return f"{word} {format_value(x)}"


def _pct_of(v: Verdict, ceiling: float | None) -> str:
    """How far the figure is from what it is held to: its typical figure, else the spec it is a fraction of."""
    ref = v.typical if v.typical else None
    if ref:
        return f"{v.value / ref:.0%} of typical {format_value(ref)}"
    return f"{v.value / ceiling:.0%} of spec" if ceiling else (v.reference or "")


def _dev(value: float, v: Verdict) -> str:
    d = value / v.peer_median - 1
    return f"{abs(d):.0%} {'below' if d < 0 else 'above'}"


__all__ = ["SHARED_NOTE", "Judge", "interval", "shared_with", "pids_in", "PEER_WARN", "PEER_FAIL"]
