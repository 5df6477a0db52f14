"""Schedules of node pairs for the fabric check: rounds of disjoint pairs, each a pure function of its input.

A pair names two nodes, the one earlier in the input list first (second_pass: the suspect first). The pairs of a
round share no node, so a round runs at once. Modes: ``quick`` (one random matching), ``stride`` (partners at
distances 1, 2, 4, …), ``full`` (the circle method: every pair once), ``racks-within`` and ``racks-across``.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpubench.check.fabric.racks import missing
from gpubench.errors import UsageError

Pair = tuple[str, str]
Round = tuple[Pair, ...]
MODES = ("quick", "stride", "full", "racks-within", "racks-across")
SECOND_PASS_ROUNDS = 1  # what an estimate counts for the suspects' second pass: one round, where suspects are few
_FILL_TRIES = 64  # partners a fill tries per idle node: a fill is a bonus, and must not make a plan slow


def _names(nodes: Sequence[str]) -> list[str]:
    names = list(nodes)
    if len(set(names)) != len(names):
        twice = next(n for n, c in Counter(names).items() if c > 1)
        raise UsageError(f"the node {twice} is named twice in the fabric check's node list: give each node once")
    return names


def _named(names: list[str], pairs) -> Round:
    return tuple((names[a], names[b]) if a < b else (names[b], names[a]) for a, b in pairs)


def _as_pairs(partner: list[int]) -> list[tuple[int, int]]:
    return [(a, b) for a, b in enumerate(partner) if a < b]


def quick(nodes: Sequence[str], seed: int = 0) -> list[Round]:
    """One random perfect matching (``random.Random(seed)``); with an odd count, the node left out meets a random
    other node in a second round."""
    names = _names(nodes)
    rng = random.Random(seed)
    order = list(range(len(names)))
    rng.shuffle(order)
    rounds = [sorted((min(p), max(p)) for p in zip(order[0::2], order[1::2]))] if len(order) > 1 else []
    if len(order) % 2 and len(order) > 1:
        rounds.append([(order[-1], rng.choice(order[:-1]))])
    return [_named(names, r) for r in rounds]


def stride(nodes: Sequence[str]) -> list[Round]:
    """ceil(log2 N) rounds: round k pairs position i with i XOR 2^k, so each node meets partners at distances 1, 2,
    4, …; a partner past N leaves the node idle that round.

    No node is idle in every round (for N >= 2: a node below 2^(K-1) meets i XOR 1, one above meets i - 2^(K-1) in
    the last round). Idle nodes of a round are paired with each other where they have not met, and a node left with
    one partner (the last of 2^k + 1 nodes) takes a second from a node that has three, so that a slow node shows as
    two or more failing pairs; only with 3 nodes (2 rounds of one pair) do two nodes keep one partner each.
    """
    names = _names(nodes)
    n = len(names)
    rounds = [[i ^ (1 << k) if i ^ (1 << k) < n else -1 for i in range(n)] for k in range(max(n - 1, 0).bit_length())]
    met: list[set[int]] = [set() for _ in range(n)]
    for partner in rounds:
        for a, b in enumerate(partner):
            if b >= 0:
                met[a].add(b)
    for partner in rounds:
        _fill(partner, met)
    _lend(rounds, met)
    for partner in rounds:
        _fill(partner, met)
    return [_named(names, _as_pairs(p)) for p in rounds]


def _fill(partner: list[int], met: list[set[int]], rack: list[int] | None = None) -> None:
    """Pair the nodes a round leaves idle with partners they have not met (in another rack where ``rack`` is given):
    more links measured in the same rounds. Fewest partners first; a bounded search, so a plan stays fast."""
    idle = [i for i, p in enumerate(partner) if p < 0]
    if len(idle) < 2 or rack is not None and len({rack[i] for i in idle}) < 2:
        return
    if rack is None:
        idle.sort(key=lambda i: (len(met[i]), i))
    else:  # interleave the racks, so that a node's next few idle nodes are in other racks
        seen: Counter = Counter()
        turn: dict[int, int] = {}
        for i in idle:
            turn[i] = seen[rack[i]]
            seen[rack[i]] += 1
        idle.sort(key=lambda i: (len(met[i]), turn[i], rack[i], i))
    for at, x in enumerate(idle):
        if partner[x] >= 0:
            continue
        for y in idle[at + 1:at + 1 + _FILL_TRIES]:
            if partner[y] < 0 and y not in met[x] and (rack is None or rack[x] != rack[y]):
                partner[x], partner[y] = y, x
                met[x].add(y)
                met[y].add(x)
                break


def _lend(rounds: list[list[int]], met: list[set[int]]) -> None:
    """Give a node that met one partner a second, from a pair whose other node met three or more (and so keeps two):
    a node with one partner cannot be told from a bad link."""
    for x in range(len(met)):
        for partner in rounds:
            if len(met[x]) >= 2:
                break
            if partner[x] >= 0:
                continue
            for a, b in enumerate(partner):
                if b >= 0 and a != x and a not in met[x] and len(met[b]) >= 3:
                    partner[a], partner[x], partner[b] = x, a, -1
                    met[a] ^= {b, x}  # a leaves b for x
                    met[b].discard(a)
                    met[x].add(a)
                    break


def _circle(count: int) -> list[list[tuple[int, int]]]:
    """Round robin over positions 0..count-1 by the circle method: 0 stays, the rest turn a step each round; an odd
    count gets a phantom partner (a bye), dropped from the pairs."""
    if count < 2:
        return []
    m = count + count % 2
    half = m // 2
    ring = list(range(1, m))
    out = []
    for r in range(m - 1):
        turn = ring[r:] + ring[:r]
        pairs = [(0, turn[0]), *zip(turn[1:half], turn[:half - 1:-1])]
        out.append([p for p in pairs if p[0] < count and p[1] < count] if count % 2 else pairs)
    return out


def full(nodes: Sequence[str]) -> list[Round]:
    """Every pair of nodes exactly once by the circle method: N-1 rounds of N/2 pairs (N even), N rounds of
    (N-1)/2 pairs with one node resting (N odd)."""
    names = _names(nodes)
    return [_named(names, r) for r in _circle(len(names))]


def racks(nodes: Sequence[str], rack_of: Mapping[str, str], across: bool) -> list[Round]:
    """Pairs inside racks (``across`` False: the circle method in every rack at once, round k the union of each
    rack's k-th round) or only between racks (the circle method over the racks, node i of one rack with node i of
    the other; idle nodes of a round paired across racks where they can be; a node still without a partner in
    another rack, one of a bigger rack's extra nodes, meets one in extra rounds)."""
    names = _names(nodes)
    if lost := missing(names, rack_of):
        more = f" and {len(lost) - 3} more" if len(lost) > 3 else ""
        raise UsageError(f"no rack for the node {', '.join(lost[:3])}{more}: name every node of the allocation in "
                         "the topology file")
    members: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        members.setdefault(rack_of[name], []).append(i)
    groups = list(members.values())
    if not across:
        rounds: list[list[tuple[int, int]]] = []
        for group in groups:
            for k, pairs in enumerate(_circle(len(group))):
                if k == len(rounds):
                    rounds.append([])
                rounds[k] += [(group[a], group[b]) for a, b in pairs]
        return [_named(names, r) for r in rounds]
    return [_named(names, _as_pairs(p)) for p in _across(len(names), groups)]


def _across(n: int, groups: list[list[int]]) -> list[list[int]]:
    """Partner lists of the rounds between racks (see :func:`racks`)."""
    rack = [0] * n
    for g, group in enumerate(groups):
        for i in group:
            rack[i] = g
    met: list[set[int]] = [set() for _ in range(n)]
    rounds = []
    for rack_pairs in _circle(len(groups)):
        partner = [-1] * n
        for ga, gb in rack_pairs:
            for a, b in zip(groups[ga], groups[gb]):
                partner[a], partner[b] = b, a
                met[a].add(b)
                met[b].add(a)
        _fill(partner, met, rack)
        rounds.append(partner)
    return rounds + _catch_up([i for i in range(n) if not met[i]], rack, met)


def _catch_up(lonely: list[int], rack: list[int], met: list[set[int]]) -> list[list[int]]:
    """Extra rounds that give each node no partner in another rack yet (the extra nodes of a bigger rack) one: a
    node of another rack that has one, the least busy first, each once a round."""
    hosts = [(0, i) for i in range(len(rack)) if met[i]]
    heapq.heapify(hosts)
    rounds: list[list[int]] = []
    for x in lonely:
        skipped = []
        while hosts and rack[hosts[0][1]] == rack[x]:
            skipped.append(heapq.heappop(hosts))
        if hosts:
            load, y = heapq.heappop(hosts)
            if load == len(rounds):
                rounds.append([-1] * len(rack))
            rounds[load][x], rounds[load][y] = y, x
            met[x].add(y)
            met[y].add(x)
            heapq.heappush(hosts, (load + 1, y))
        for item in skipped:
            heapq.heappush(hosts, item)
    for partner in rounds:
        _fill(partner, met, rack)
    return rounds


def second_pass(suspects: Sequence[str], good: Sequence[str], tried: set[frozenset], seed: int = 0) -> list[Round]:
    """Rounds that pair each suspect with a known-good node it has not been paired with (``tried`` holds the pairs
    measured so far), the suspect first.

    A different good node for each suspect where there are enough, else the good nodes serve several, in more
    rounds (each good node once a round). A suspect that has met every good node is paired with one anyway (the
    least busy): a second reading against a good partner still tells the suspect from the link. No good node: [].
    A node given as both is a suspect.
    """
    bad = list(dict.fromkeys(suspects))
    sure = [g for g in dict.fromkeys(good) if g not in set(bad)]
    if not bad or not sure:
        return []
    random.Random(seed).shuffle(sure)  # spread the suspects over the good nodes, not always the first ones
    load = dict.fromkeys(sure, 0)
    served: dict[str, list[str]] = {g: [] for g in sure}
    for s in bad:
        g = min(sure, key=lambda g: (frozenset((s, g)) in tried, load[g]))  # ties: the shuffled order
        load[g] += 1
        served[g].append(s)
    rounds: list[list[Pair]] = [[] for _ in range(max(load.values()))]
    for g in sure:
        for j, s in enumerate(served[g]):
            rounds[j].append((s, g))
    return [tuple(r) for r in rounds]


@dataclass(frozen=True)
class Plan:
    """A mode's rounds of node pairs, made before any is measured."""

    mode: str
    rounds: tuple[Round, ...]


def plan(mode: str, nodes: Sequence[str], rack_of: Mapping[str, str] | None = None, seed: int = 0) -> Plan:
    """The rounds of ``mode`` (one of MODES) over ``nodes``; the racks modes need ``rack_of``."""
    if mode not in MODES:
        raise UsageError(f"unknown fabric mode {mode!r}: give one of {', '.join(MODES)}")
    if mode.startswith("racks-"):
        if not rack_of:
            raise UsageError(f"the mode {mode} needs the nodes' racks: give a topology file (Slurm's topology.conf "
                             "or 'node rack' lines), or run under Slurm's topology plugin, or pick another mode")
        rounds = racks(nodes, rack_of, across=mode == "racks-across")
    else:
        rounds = quick(nodes, seed) if mode == "quick" else stride(nodes) if mode == "stride" else full(nodes)
    return Plan(mode, tuple(rounds))


def estimate_s(p: Plan, round_s: float) -> float:
    """Seconds ``p`` takes at ``round_s`` a round, with one round for the suspects' second pass."""
    return (len(p.rounds) + SECOND_PASS_ROUNDS) * round_s if p.rounds else 0.0


def _duration(seconds: float) -> str:
    for limit, unit, size in ((100, "s", 1), (100 * 60, "min", 60), (48 * 3600, "h", 3600)):
        if seconds < limit:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds / 86400:.3g} days"


def describe(p: Plan, round_s: float) -> str:
    """One line a user reads before the rounds start: how many rounds of how many pairs, and about how long."""
    sizes = [len(r) for r in p.rounds]
    if not sizes:
        return f"{p.mode}: no node pairs to measure (a pair needs two nodes{', in two racks' * ('across' in p.mode)})"
    count = f"{sizes[0]}" if min(sizes) == max(sizes) else f"{min(sizes)} to {max(sizes)}"
    return (f"{p.mode}: {len(sizes)} round{'s' * (len(sizes) != 1)} of {count} node pair{'s' * (max(sizes) != 1)} "
            f"(+ a second pass for suspects), about {_duration(estimate_s(p, round_s))} "
            f"at {_duration(round_s)} a round")


def cost_table(sizes: Sequence[int] = (16, 64, 1024), round_s: float = 2.0, rack_size: int = 16) -> list[tuple]:
    """(mode, nodes, rounds, seconds) of each mode at each size, from the schedules themselves; the racks modes with
    ``rack_size`` nodes a rack; seconds as :func:`estimate_s` counts them."""
    rows = []
    for n in sizes:
        nodes = [f"node{i:04d}" for i in range(n)]
        rack_of = {name: f"rack{i // rack_size}" for i, name in enumerate(nodes)}
        for mode in MODES:
            p = plan(mode, nodes, rack_of)
            rows.append((mode, n, len(p.rounds), estimate_s(p, round_s)))
    return rows
