"""The fabric check's schedules of node pairs, held to their properties over many node counts and seeds."""

from __future__ import annotations

import itertools
import math
import time

import pytest

from gpubench.check.fabric import schedule as s
from gpubench.errors import UsageError

COUNTS = [*range(1, 41), 63, 64, 65, 100, 127, 129, 257, 513]
SEEDS = (0, 1, 7, 12345)


def _nodes(n: int) -> list[str]:
    return [f"gpu{i:04d}" for i in range(n)]


def _sound(rounds, nodes) -> None:
    """Every round's pairs are disjoint, no node meets itself, and a pair names the earlier node first."""
    at = {name: i for i, name in enumerate(nodes)}
    for r in rounds:
        seen = [x for pair in r for x in pair]
        assert len(seen) == len(set(seen)), r
        for a, b in r:
            assert a != b and at[a] < at[b], (a, b)
    assert all(r for r in rounds), "an empty round"


def _partners(rounds) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a, b in itertools.chain.from_iterable(rounds):
        out.setdefault(a, set()).add(b)
        out.setdefault(b, set()).add(a)
    return out


@pytest.mark.parametrize("n", COUNTS)
def test_full_meets_every_pair_exactly_once(n):
    nodes = _nodes(n)
    rounds = s.full(nodes)
    _sound(rounds, nodes)
    assert len(rounds) == (0 if n < 2 else n - 1 if n % 2 == 0 else n)
    pairs = [frozenset(p) for r in rounds for p in r]
    assert len(pairs) == len(set(pairs)) == n * (n - 1) // 2
    assert all(len(r) == n // 2 for r in rounds)  # every node busy each round, but the odd one's bye


@pytest.mark.parametrize("n", COUNTS)
def test_stride_takes_at_most_log2_rounds_and_leaves_no_node_out(n):
    nodes = _nodes(n)
    rounds = s.stride(nodes)
    _sound(rounds, nodes)
    assert len(rounds) <= math.ceil(math.log2(n)) if n > 1 else rounds == []
    met = _partners(rounds)
    assert set(met) == (set(nodes) if n > 1 else set())
    # two partners at least, so that a slow node shows as a star; 3 nodes in 2 rounds of one pair cannot
    assert all(len(p) >= 2 for p in met.values()) or n <= 3, {k: v for k, v in met.items() if len(v) < 2}


@pytest.mark.parametrize("n", [2, 4, 8, 16, 64, 1024])
def test_stride_of_a_power_of_two_is_the_hypercube(n):
    nodes = _nodes(n)
    for k, r in enumerate(s.stride(nodes)):
        assert sorted(r) == sorted((nodes[i], nodes[i ^ 1 << k]) for i in range(n) if i < i ^ 1 << k)


def test_the_last_of_two_to_the_k_plus_one_nodes_meets_two_partners():
    # a plain XOR stride gives node 16 of 17 one partner (node 0), and a slow node 16 would read as one bad link
    assert len(_partners(s.stride(_nodes(17)))["gpu0016"]) >= 2


@pytest.mark.parametrize("n", [9, 17, 513])
def test_stride_pairs_the_nodes_a_round_leaves_idle(n):
    # XOR pairs only 0 with 2^k in the last round of 2^k + 1 nodes; the idle ones meet each other in the same round
    assert len(s.stride(_nodes(n))[-1]) == (n - 1) // 2


def test_racks_across_pairs_the_nodes_a_round_leaves_idle():
    # leaf0 meets leaf1 (3 pairs) while leaf0's 3 others and leaf2 idle: they meet in that round, not in one more
    nodes = _nodes(10)
    rack_of = dict(zip(nodes, ["leaf0"] * 6 + ["leaf1"] * 3 + ["leaf2"]))
    rounds = s.racks(nodes, rack_of, across=True)
    assert len(rounds) == 3 and sum(len(r) for r in rounds) >= 8


@pytest.mark.parametrize("n", COUNTS)
@pytest.mark.parametrize("seed", SEEDS)
def test_quick_is_one_matching_and_covers_every_node(n, seed):
    nodes = _nodes(n)
    rounds = s.quick(nodes, seed)
    _sound(rounds, nodes)
    assert len(rounds) == (0 if n < 2 else 1 if n % 2 == 0 else 2)
    assert set(_partners(rounds)) == (set(nodes) if n > 1 else set())
    if rounds:
        assert len(rounds[0]) == n // 2
    assert s.quick(nodes, seed) == rounds  # seeded: the same plan on every rank


def test_quick_draws_a_new_matching_for_a_new_seed():
    nodes = _nodes(32)
    assert len({s.quick(nodes, seed)[0] for seed in SEEDS}) == len(SEEDS)


def test_one_node_has_no_rounds_and_two_have_one():
    for f in (s.quick, s.stride, s.full):
        assert f(["a"]) == [] and f([]) == []
        assert f(["a", "b"]) == [(("a", "b"),)]
    assert s.racks(["a"], {"a": "r"}, across=False) == []
    assert s.racks(["a", "b"], {"a": "r", "b": "r"}, across=False) == [(("a", "b"),)]
    assert s.racks(["a", "b"], {"a": "r", "b": "q"}, across=True) == [(("a", "b"),)]


def _layouts():
    """(nodes, rack_of): equal racks, unequal racks, a rack of one, racks named out of the nodes' order."""
    out = []
    for sizes in ((4, 4), (8, 8, 8, 8), (5, 3), (6, 1, 2), (7, 7, 7), (16, 3, 9, 1, 1), (2,) * 9, (1,) * 5, (12,)):
        nodes = _nodes(sum(sizes))
        racks = [f"leaf{k}" for k, size in enumerate(sizes) for _ in range(size)]
        out.append((nodes, dict(zip(nodes, racks))))
    nodes = _nodes(10)
    out.append((nodes, {name: f"leaf{i % 3}" for i, name in enumerate(nodes)}))
    return out


@pytest.mark.parametrize("nodes,rack_of", _layouts())
def test_racks_within_pairs_every_pair_of_a_rack_once(nodes, rack_of):
    rounds = s.racks(nodes, rack_of, across=False)
    _sound(rounds, nodes)
    pairs = [frozenset(p) for r in rounds for p in r]
    assert all(rack_of[a] == rack_of[b] for a, b in pairs)
    sizes = {rack: list(rack_of.values()).count(rack) for rack in set(rack_of.values())}
    assert len(pairs) == len(set(pairs)) == sum(k * (k - 1) // 2 for k in sizes.values())
    biggest = max(sizes.values())
    assert len(rounds) == (0 if biggest < 2 else biggest - 1 if biggest % 2 == 0 else biggest)


@pytest.mark.parametrize("nodes,rack_of", _layouts())
def test_racks_across_pairs_only_racks_apart_and_every_node(nodes, rack_of):
    rounds = s.racks(nodes, rack_of, across=True)
    _sound(rounds, nodes)
    assert all(rack_of[a] != rack_of[b] for r in rounds for a, b in r)
    racks = set(rack_of.values())
    assert set(_partners(rounds)) == (set(nodes) if len(racks) > 1 else set())


def test_racks_across_of_equal_racks_is_the_circle_over_racks_with_every_node_busy():
    nodes = _nodes(32)
    rack_of = {name: f"leaf{i // 8}" for i, name in enumerate(nodes)}
    rounds = s.racks(nodes, rack_of, across=True)
    assert len(rounds) == 3 and all(len(r) == 16 for r in rounds)


def test_racks_need_a_rack_for_every_node():
    with pytest.raises(UsageError, match="no rack for the node b"):
        s.racks(["a", "b"], {"a": "r"}, across=False)


def test_a_node_named_twice_is_a_usage_error():
    with pytest.raises(UsageError, match="gpu1 is named twice"):
        s.full(["gpu1", "gpu2", "gpu1"])


def test_second_pass_pairs_suspects_with_untried_good_nodes():
    suspects, good = ["s1", "s2", "s3"], ["g1", "g2", "g3", "g4"]
    tried = {frozenset(p) for p in (("s1", "g1"), ("s1", "g2"), ("s2", "g1"), ("s3", "g3"))}
    for seed in SEEDS:
        rounds = s.second_pass(suspects, good, tried, seed)
        pairs = [p for r in rounds for p in r]
        assert len(rounds) == 1 and sorted(a for a, _ in pairs) == suspects
        assert all(b in good and frozenset((a, b)) not in tried for a, b in pairs)
        assert len({b for _, b in pairs}) == 3  # a different good node for each suspect


@pytest.mark.parametrize("n_bad,n_good", [(1, 1), (3, 1), (5, 2), (7, 3), (10, 10), (30, 4)])
@pytest.mark.parametrize("seed", SEEDS)
def test_second_pass_uses_each_good_node_once_a_round_and_never_two_suspects(n_bad, n_good, seed):
    bad, good = [f"s{i}" for i in range(n_bad)], [f"g{i}" for i in range(n_good)]
    tried = {frozenset((f"s{i}", f"g{i % n_good}")) for i in range(n_bad)}  # each suspect met one good node
    rounds = s.second_pass(bad, good, tried, seed)
    assert len(rounds) == math.ceil(n_bad / n_good)  # the good nodes shared evenly
    for r in rounds:
        seen = [x for p in r for x in p]
        assert len(seen) == len(set(seen))
        assert all(a in bad and b in good for a, b in r)
    pairs = [p for r in rounds for p in r]
    assert sorted(a for a, _ in pairs) == sorted(bad)
    if n_good > 1:  # an untried good node exists for each suspect: it is the one taken
        assert not any(frozenset(p) in tried for p in pairs)


def test_second_pass_pairs_a_suspect_that_met_every_good_node_anyway():
    rounds = s.second_pass(["s"], ["g1", "g2"], {frozenset(("s", "g1")), frozenset(("s", "g2"))})
    assert len(rounds) == 1 and rounds[0][0][0] == "s" and rounds[0][0][1] in ("g1", "g2")


def test_second_pass_without_good_nodes_or_suspects_is_empty():
    assert s.second_pass(["s1"], [], set()) == []
    assert s.second_pass([], ["g1"], set()) == []
    assert s.second_pass(["a"], ["a"], set()) == []  # a node given as both is a suspect


@pytest.mark.parametrize("mode", s.MODES)
def test_a_plan_of_1024_nodes_takes_under_a_second(mode):
    nodes = _nodes(1024)
    rack_of = {name: f"leaf{i // 16}" for i, name in enumerate(nodes)}
    t = time.perf_counter()
    p = s.plan(mode, nodes, rack_of)
    assert time.perf_counter() - t < 1.0
    assert p.mode == mode and p.rounds
    if mode == "full":
        assert len(p.rounds) == 1023 and all(len(r) == 512 for r in p.rounds)


def test_plan_refuses_an_unknown_mode_and_racks_without_racks():
    with pytest.raises(UsageError, match="give one of quick, stride, full, racks-within, racks-across"):
        s.plan("fast", _nodes(4))
    with pytest.raises(UsageError, match="racks-within needs the nodes' racks: give a topology file"):
        s.plan("racks-within", _nodes(4))


def test_describe_says_rounds_pairs_and_time():
    p = s.plan("quick", _nodes(16))
    assert s.describe(p, 2.0) == ("quick: 1 round of 8 node pairs (+ a second pass for suspects), "
                                  "about 4 s at 2 s a round")
    line = s.describe(s.plan("full", _nodes(1024)), 2.0)
    assert line.startswith("full: 1023 rounds of 512 node pairs") and "about 34.1 min" in line
    assert s.describe(s.plan("quick", _nodes(5)), 2.0).startswith("quick: 2 rounds of 1 to 2 node pairs")
    assert "no node pairs" in s.describe(s.plan("quick", _nodes(1)), 2.0)


def test_cost_table_counts_the_real_schedules():
    rows = {(mode, n): (rounds, sec) for mode, n, rounds, sec in s.cost_table((16, 64, 1024), 2.0)}
    assert rows["full", 1024] == (1023, 2048.0)
    assert rows["stride", 1024] == (10, 22.0)
    assert rows["quick", 1024] == (1, 4.0)
    assert rows["racks-within", 64] == (15, 32.0)  # racks of 16 by default
    assert rows["racks-across", 16] == (0, 0.0)  # one rack: nothing between racks
