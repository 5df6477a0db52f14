"""The fabric check's judging: from the node pairs measured, which node, NIC or link of an allocation is slow.

Pure: results in, verdicts out. Each pair (every rail at once, GPU g of one node with GPU g of the other) is held to
the fleet's median (the first rounds' pairs that returned something), to its round's best (ClusterKit) and to an
envelope's floor where one is given. Then, as the cluster tools do it:

- a node is **named** (FAIL) only when it fails with two or more different partners and passes with none; a node
  that passed once with a partner is never failed (Google CHS's second pass), and its partners are spared;
- a **link** FAILs alone when its pair fails and both its nodes passed with other partners;
- a slow pair neither of whose nodes was measured with another partner is a WARN "not confirmed", never a FAIL; a
  pair that returned nothing within the timeout is a FAIL naming both nodes (unless a named node explains it);
- a named node's rails, measured one at a time, name its NIC: a rail below the node's other rails (or silent).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from gpubench.check.verdicts import State, Verdict, mark_simulated
from gpubench.console import fmt_value

# A pair below this share of the fleet's median FAILs: Azure's H100 guidance replaces a node below ~300 of ~450 GB/s
# (0.67) and a pair with one bad node reads about half; a healthy pair's few % of noise never comes near.
FAIL_FRACTION = 0.75
# A pair below this share of the median WARNs: Azure's warn line (~400 of ~450 GB/s).
WARN_FRACTION = 0.9
# ClusterKit calls a pair bad below 93 % of the best pair measured: here of its round's best (pairs measured at the same
# time, through the same spine load), and a WARN only, since the best is one pair and the median many.
BEST_FRACTION = 0.93
# ClusterKit calls a pair bad above 2.1 x the lowest latency measured (a WARN here: latency is noisy at 2 nodes).
LATENCY_FACTOR = 2.1
# A node is named only with this many different failing partners: one failing pair could be either end or the link
# (CHS re-pairs suspects; Azure: "the node present in every failing pair is bad").
NAMED_PARTNERS = 2
# A named node's line lists this many of its failing pairs (full mode fails it with every other node).
LISTED = 3
PHASES = ("first", "retest", "rail")
UNIT = "GB/s"
TITLES = {"fabric_node": "fabric: a node against its partners, every rail at once",
          "fabric_link": "fabric: the link between two nodes, every rail at once",
          "fabric_nic": "fabric: one NIC (rail) of a named node, measured alone"}

Key = tuple[str, str, int, str]  # (a, b, round, phase): one measurement of a pair


@dataclass
class PairResult:
    """One pair's exchange. ``busbw``: GB/s over every rail (a "rail" result: None, its ``rails`` hold the rail
    measured alone); None: nothing returned within --timeout. A rail's value None: that rail silent."""

    round: int
    a: str
    b: str
    phase: str
    busbw: float | None
    latency_us: float | None = None
    rails: dict[int, float | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"a pair's phase is one of {', '.join(PHASES)}, not {self.phase!r}")
        if self.a == self.b:
            raise ValueError(f"a pair is two different nodes, not {self.a} with itself")

    @property
    def key(self) -> Key:
        return (self.a, self.b, self.round, self.phase)

    @property
    def link(self) -> tuple[str, str]:
        return (min(self.a, self.b), max(self.a, self.b))

    def partner(self, node: str) -> str:
        return self.b if node == self.a else self.a


@dataclass(frozen=True)
class Limits:
    fail_fraction: float = FAIL_FRACTION
    warn_fraction: float = WARN_FRACTION
    best_fraction: float = BEST_FRACTION
    latency_factor: float = LATENCY_FACTOR
    floor: float | None = None  # an envelope's per-pair GB/s floor, where one is given

    def __post_init__(self) -> None:
        if not 0 < self.fail_fraction <= self.warn_fraction <= 1 or not 0 < self.best_fraction <= 1:
            raise ValueError("fabric limits: 0 < fail_fraction <= warn_fraction <= 1 and 0 < best_fraction <= 1")
        if self.latency_factor < 1:
            raise ValueError(f"fabric limits: latency_factor is 1 or more, not {self.latency_factor}")


@dataclass
class _Refs:
    median: float | None  # the fleet's median pair, GB/s
    peers: int  # how many pairs the median is of
    best: dict[tuple[str, int], float]  # each round's best pair, by (phase, round)
    lowest_latency: float | None


@dataclass
class _Standing:
    """Every pair's finding and what it says of each node."""

    pairs: list[PairResult]
    refs: _Refs
    findings: dict[Key, tuple[State, str]]  # slow pairs only: level and why
    good: dict[str, list[PairResult]]  # node -> its pairs that did not fail
    fails: dict[str, dict[str, PairResult]]  # node -> failing partner -> a failing pair
    named: set[str]
    mine: dict[str, list[PairResult]]  # node -> every pair it was in


def _pct(ratio: float) -> str:
    return f"{100 * ratio:.0f} %"


def _refs(pairs: list[PairResult]) -> _Refs:
    first = [r.busbw for r in pairs if r.phase == "first" and r.busbw is not None]
    pool = first or [r.busbw for r in pairs if r.busbw is not None]  # no first round returned: the retests
    best: dict[tuple[str, int], float] = {}
    for r in pairs:
        if r.busbw is not None:
            best[(r.phase, r.round)] = max(best.get((r.phase, r.round), r.busbw), r.busbw)
    lat = [r.latency_us for r in pairs if r.latency_us is not None and r.latency_us > 0]
    return _Refs(statistics.median(pool) if pool else None, len(pool), best, min(lat) if lat else None)


def _figure(r: PairResult, refs: _Refs) -> str:
    """The pair's figure with both references: "12.1 GB/s, 48 % of the fleet's median 25.3, 47 % of its round's
    best 25.9"."""
    if r.busbw is None:
        return f"returned nothing within the timeout ({_when(r)})"
    parts = [f"{fmt_value(r.busbw)} {UNIT}"]
    if refs.median:
        parts.append(f"{_pct(r.busbw / refs.median)} of the fleet's median {fmt_value(refs.median)}")
    best = refs.best.get((r.phase, r.round))
    if best:
        parts.append(f"{_pct(r.busbw / best)} of its round's best {fmt_value(best)}")
    return ", ".join(parts)


def _when(r: PairResult) -> str:
    return f"round {r.round}" + (", retest" if r.phase == "retest" else "")


def _judge(r: PairResult, refs: _Refs, lim: Limits) -> tuple[State, str] | None:
    """A pair's level (FAIL or WARN) and why, or None where it is not slow."""
    if r.busbw is None:
        return "FAIL", _figure(r, refs)
    med, best, low = refs.median, refs.best.get((r.phase, r.round)), refs.lowest_latency
    below_floor = lim.floor is not None and r.busbw < lim.floor
    slow_latency = low is not None and r.latency_us is not None and r.latency_us > lim.latency_factor * low
    fail = below_floor or (med is not None and r.busbw < lim.fail_fraction * med)
    warn = (med is not None and r.busbw < lim.warn_fraction * med) or slow_latency or (
        best is not None and r.busbw < lim.best_fraction * best)
    if not (fail or warn):
        return None
    why = _figure(r, refs) + (f", below the floor {fmt_value(lim.floor)}" if below_floor else "")
    if slow_latency:
        why += f", latency {fmt_value(r.latency_us)} µs, {r.latency_us / low:.1f} × the lowest {fmt_value(low)} µs"
    return ("FAIL" if fail else "WARN"), why


def _standing(results: list[PairResult], limits: Limits) -> _Standing:
    pairs = [r for r in results if r.phase != "rail"]  # a rail alone is not a pair's figure: the NIC verdicts read it
    refs = _refs(pairs)
    if len({r.key for r in pairs}) < len(pairs):
        raise ValueError("fabric results: two results of the same pair in the same round and phase")
    findings = {r.key: f for r in pairs if (f := _judge(r, refs, limits))}
    good: dict[str, list[PairResult]] = defaultdict(list)
    fails: dict[str, dict[str, PairResult]] = defaultdict(dict)
    mine: dict[str, list[PairResult]] = defaultdict(list)
    for r in pairs:
        failed = findings.get(r.key, ("PASS",))[0] == "FAIL"
        for node in (r.a, r.b):
            mine[node].append(r)
            if failed:
                fails[node].setdefault(r.partner(node), r)
            else:
                good[node].append(r)
    named = {n for n, by in fails.items() if len(by) >= NAMED_PARTNERS and not good.get(n)}
    return _Standing(pairs, refs, findings, good, fails, named, mine)


def slow(results: list[PairResult], limits: Limits = Limits()) -> dict[Key, str]:
    """Every slow pair (FAIL- or WARN-level; rail results aside) and why, in words."""
    return {k: why for k, (_, why) in _standing(results, limits).findings.items()}


def failing(results: list[PairResult], limits: Limits = Limits()) -> dict[Key, str]:
    """The FAIL-level slow pairs (below fail_fraction of the median or the floor, or silent) and why."""
    return {k: why for k, (level, why) in _standing(results, limits).findings.items() if level == "FAIL"}


def suspects(results: list[PairResult], limits: Limits = Limits()) -> set[str]:
    """The nodes to re-test with a known-good partner: in a failing pair that no named node explains, and without a
    good pair of their own (a partner's good pair elsewhere clears the partner, not them). Named nodes are not
    suspects any more: named_nodes gives them, for the per-rail retest."""
    s = _standing(results, limits)
    return {n for n, by in s.fails.items()
            if n not in s.named and not s.good.get(n) and any(p not in s.named for p in by)}


def named_nodes(results: list[PairResult], limits: Limits = Limits()) -> set[str]:
    """The nodes that fail with two or more different partners and pass with none."""
    return set(_standing(results, limits).named)


def verdicts(nodes: list[str], results: list[PairResult], limits: Limits = Limits(),
             simulated: bool = False) -> list[Verdict]:
    """One verdict per node, per measured link, and per NIC of a named node whose rails were measured."""
    s = _standing(results, limits)
    every = list(dict.fromkeys([*nodes, *sorted({n for r in results for n in (r.a, r.b)} - set(nodes))]))
    nics = {n: _nic_verdicts(n, results, limits) for n in sorted(s.named)}
    out = [_node_verdict(n, s, limits, nics.get(n), alone=len(every) == 1) for n in every]
    by_link: dict[tuple[str, str], list[PairResult]] = defaultdict(list)
    for r in s.pairs:
        by_link[r.link].append(r)
    out += [_link_verdict(link, rs, s, limits) for link, rs in sorted(by_link.items())]
    out += [v for n in sorted(nics) for v in nics[n][0]]
    if simulated:
        mark_simulated(out)
    return out


def _fleet(check: str, s: _Standing, limits: Limits, nodes: list[str]) -> Verdict:
    """A verdict held to the fleet's references, its state and text still to say."""
    med = s.refs.median
    fail_at = [x for x in (limits.fail_fraction * med if med else None, limits.floor) if x is not None]
    ref = f"the fleet's median of {s.refs.peers} pairs" if med else "no pair returned a figure"
    return Verdict(check=check, target="", state="SKIP", text="", title=TITLES[check], unit=UNIT, better="higher",
                   fail_at=max(fail_at) if fail_at else None, warn_at=limits.warn_fraction * med if med else None,
                   typical=med, peer_median=med, peers=s.refs.peers, nodes=nodes,
                   reference=ref + (f"; the envelope's floor {fmt_value(limits.floor)} {UNIT}" if limits.floor else ""))


def _best(rs: list[PairResult]) -> PairResult:
    return max(rs, key=lambda r: -1.0 if r.busbw is None else r.busbw)


def _named_why(node: str, s: _Standing) -> str:
    return f"{node}, which fails with {len(s.fails[node])} different partners"


def _node_verdict(node: str, s: _Standing, limits: Limits, nic: tuple[list[Verdict], str] | None,
                  alone: bool) -> Verdict:
    v = _fleet("fabric_node", s, limits, [node])
    v.target = node
    mine = s.mine.get(node)
    if not mine:
        v.text = "not measured: " + ("the allocation has one node, no partner" if alone else "no pair with this node")
        return v
    v.value = _best(mine).busbw
    if node in s.named:
        by = sorted(s.fails[node].items())
        fails = "; ".join(f"with {p}: {_figure(r, s.refs)}" for p, r in by[:LISTED])
        fails += f"; and {len(by) - LISTED} more" if len(by) > LISTED else ""
        v.state, v.text = "FAIL", f"fails with {len(s.fails[node])} different partners, passes with none ({fails})"
        if nic and nic[1]:
            v.text += f"; {nic[1]}"
        return v
    spared = sorted(p for p in s.fails.get(node, {}) if p in s.named)
    v.notes = [f"spared: paired with {_named_why(p, s)} ({_when(r)})" if p in s.named else
               f"the pair with {p} fails ({_when(r)}): {_figure(r, s.refs)}" for p, r in s.fails.get(node, {}).items()]
    if s.good.get(node):
        best = _best([r for r in s.good[node] if r.key not in s.findings] or s.good[node])  # a clean pair first
        found = s.findings.get(best.key)
        v.state = found[0] if found else "PASS"
        v.text = f"with {best.partner(node)}: {_figure(best, s.refs)}"
        v.text += "".join(f"; spared: its slow pair with {p} follows from {p}" for p in spared)
        return v
    if len(spared) == len(s.fails[node]):
        r = s.fails[node][spared[0]]
        v.state, v.text = "PASS", f"spared: paired only with {_named_why(spared[0], s)} ({_figure(r, s.refs)})"
        return v
    p, r = next((p, r) for p, r in sorted(s.fails[node].items()) if p not in s.named)
    v.state = "WARN"
    v.text = f"not confirmed: with {p}: {_figure(r, s.refs)}; re-test {node} with another partner"
    return v


def _link_verdict(link: tuple[str, str], rs: list[PairResult], s: _Standing, limits: Limits) -> Verdict:
    a, b = link
    v = _fleet("fabric_link", s, limits, [a, b])
    v.target, best = f"{a}-{b}", _best(rs)
    v.value = best.busbw
    failed = [r for r in rs if s.findings.get(r.key, ("PASS",))[0] == "FAIL"]
    if len(failed) < len(rs):  # it passed at least once: its best measurement decides
        found = s.findings.get(best.key)
        v.state, v.text = (found[0], found[1]) if found else ("PASS", _figure(best, s.refs))
        if failed:
            v.state = "WARN"
            v.text = f"intermittent: {v.text}; but {_figure(failed[0], s.refs)}"
        return v
    why = s.findings[best.key][1]
    named = [n for n in link if n in s.named]
    if named:
        v.state, v.nodes = "FAIL", named
        v.text = f"{why}: follows from {' and '.join(_named_why(n, s) for n in named)}"
    elif s.good.get(a) and s.good.get(b):
        ga, gb = _best(s.good[a]).partner(a), _best(s.good[b]).partner(b)
        v.state = "FAIL"
        v.text = f"{why}: the link, not either node ({a} passes with {ga}, {b} with {gb})"
    elif best.busbw is None:
        v.state = "FAIL"
        v.text = f"{why}: {a} and {b}; which one is not confirmed: re-test each with another partner"
    else:
        alone = " and ".join(n for n in link if not s.good.get(n))
        v.state, v.text = "WARN", f"not confirmed: {why}; re-test {alone} with another partner"
    return v


def _rails_of(node: str, results: list[PairResult]) -> dict[int, float | None]:
    """A node's rails measured alone, each at its best (None: silent every time); where none was measured alone (a
    silent node's rails need no round of their own: silence shows rail by rail at once), its rails in every pair where
    one of them was silent."""
    out: dict[int, float | None] = {}
    mine = [r for r in results if node in (r.a, r.b)]
    alone = [r for r in mine if r.phase == "rail"]
    silent = any(r.busbw is None for r in mine)
    for r in alone or (mine if silent else []):
        for rail, val in r.rails.items():
            had = out.get(rail)
            out[rail] = val if had is None else had if val is None else max(had, val)
    return out


def _nic_verdicts(node: str, results: list[PairResult], limits: Limits) -> tuple[list[Verdict], str]:
    """A named node's NIC verdicts, and what they say of it in a few words ("" where its rails were not measured)."""
    rails = _rails_of(node, results)
    if not rails:
        return [], ""
    vals = [x for x in rails.values() if x is not None]
    med = statistics.median(vals) if vals else None
    out, bad = [], []
    for rail in sorted(rails):
        val = rails[rail]
        v = Verdict(check="fabric_nic", target=f"{node}:rail{rail}", state="SKIP", text="", title=TITLES["fabric_nic"],
                    gpu=rail, value=val, unit=UNIT, better="higher", typical=med, peer_median=med, peers=len(vals),
                    fail_at=limits.fail_fraction * med if med else None, nodes=[node],
                    reference=f"the median of {node}'s {len(vals)} rails that returned a figure")
        if med is None:
            v.text = f"every rail of {node} returned nothing within the timeout: the node, not one NIC"
        elif val is None:
            v.state, v.text = "FAIL", f"rail {rail} of {node} returned nothing within the timeout: this NIC"
        else:
            figure = f"{fmt_value(val)} {UNIT} alone, {_pct(val / med)} of {node}'s rails' median {fmt_value(med)}"
            low = val < limits.fail_fraction * med
            v.state, v.text = ("FAIL", f"{figure}: this NIC") if low else ("PASS", figure)
        bad += [rail] if v.state == "FAIL" else []
        out.append(v)
    if bad:
        nics = ", ".join(f"{node}:rail{r}" for r in bad)
        return out, f"its NIC{'s' if len(bad) > 1 else ''} {nics} (each rail measured alone)"
    alike = f"median {fmt_value(med)} {UNIT} alone" if med else "every rail silent"
    return out, f"every rail alike ({len(rails)} rails, {alike}): the node, not one NIC"


__all__ = ["PairResult", "Limits", "Key", "slow", "failing", "suspects", "named_nodes", "verdicts",
           "FAIL_FRACTION", "WARN_FRACTION", "BEST_FRACTION", "LATENCY_FACTOR", "NAMED_PARTNERS"]
