"""The fabric check's judging (gpubench.check.fabric.judge): which node, NIC or link is slow, from pair results built
by hand here (a fleet of named nodes, a factor per slow node or link, seeded noise)."""

from __future__ import annotations

import random

import pytest

from gpubench.check.fabric.judge import (Limits, PairResult, failing, named_nodes, slow, suspects, verdicts)
from gpubench.check.verdicts import SIMULATED

BASE = 25.0  # a healthy pair, GB/s over every rail
RAILS = 8


def _names(n: int) -> list[str]:
    return [f"node{i:02d}" for i in range(n)]


def _circle(nodes: list[str]) -> list[list[tuple[str, str]]]:
    """Every pair once, N-1 rounds of disjoint pairs (the circle method, written out here for the tests)."""
    ring = list(nodes)
    rounds = []
    for _ in range(len(ring) - 1):
        half = len(ring) // 2
        rounds.append([(ring[i], ring[-1 - i]) for i in range(half)])
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return rounds


def _quick(nodes: list[str]) -> list[list[tuple[str, str]]]:
    return [[(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]]


def _measure(rounds, *, node=None, link=None, silent=(), seed=0, phase="first", start=0, noise=0.03):
    """Pair results: busbw = BASE x each node's factor x the link's factor x noise; silent nodes return nothing."""
    node, link, rng = node or {}, link or {}, random.Random(seed)
    out = []
    for i, pairs in enumerate(rounds):
        for a, b in pairs:
            bw = None
            if a not in silent and b not in silent:
                bw = BASE * node.get(a, 1) * node.get(b, 1) * link.get(frozenset((a, b)), 1)
                bw *= rng.uniform(1 - noise, 1 + noise)
            lat = None if bw is None else 10.0 * rng.uniform(1 - noise, 1 + noise)
            rails = {g: (None if bw is None else bw / RAILS) for g in range(RAILS)}
            out.append(PairResult(start + i, a, b, phase, bw, lat, rails))
    return out


def _states(vs) -> dict[tuple[str, str], str]:
    return {(v.check, v.target): v.state for v in vs}


def _one(vs, check: str, target: str):
    [v] = [v for v in vs if (v.check, v.target) == (check, target)]
    return v


@pytest.mark.parametrize("n", [4, 8, 64])
def test_a_healthy_fleet_passes_every_node_and_link(n):
    nodes = _names(n)
    for seed in range(3):
        results = _measure(_circle(nodes), seed=seed) + _measure(_quick(nodes), seed=seed + 10, start=n)
        vs = verdicts(nodes, results)
        assert {v.state for v in vs} == {"PASS"}, [v.text for v in vs if v.state != "PASS"][:3]
        assert len(vs) == n + n * (n - 1) // 2  # a node each, a link each (the quick round repeats links)
        assert slow(results) == {} and suspects(results) == set() and named_nodes(results) == set()
    link = _one(vs, "fabric_link", "node00-node01")
    assert link.unit == "GB/s" and link.better == "higher" and link.peers == n * (n - 1) // 2 + n // 2
    assert link.fail_at == pytest.approx(0.75 * link.peer_median) and link.warn_at == pytest.approx(0.9 * link.typical)
    assert link.value == max(r.busbw for r in results if r.link == ("node00", "node01"))


def _slow_node_quick(retest_partner: bool):
    """8 nodes, node03 at 0.4: one matching, then the suspects re-paired with nodes that passed."""
    nodes = _names(8)
    first = _measure(_quick(nodes), node={"node03": 0.4})
    second = [[("node03", "node04")] + ([("node02", "node00")] if retest_partner else [])]
    return nodes, first, first + _measure(second, node={"node03": 0.4}, phase="retest", start=1, seed=1)


def test_a_slow_node_is_named_after_the_second_pass_and_its_partner_spared():
    nodes, first, results = _slow_node_quick(retest_partner=True)
    assert suspects(first) == {"node02", "node03"} and named_nodes(first) == set()
    assert set(failing(first)) == {("node02", "node03", 0, "first")}
    assert "% of the fleet's median" in failing(first)[("node02", "node03", 0, "first")]
    assert named_nodes(results) == {"node03"} and suspects(results) == set()
    vs = verdicts(nodes, results)
    assert {t for (c, t), s in _states(vs).items() if s != "PASS"} == {"node03", "node02-node03", "node03-node04"}
    node03 = _one(vs, "fabric_node", "node03")
    assert node03.state == "FAIL" and node03.nodes == ["node03"] and "2 different partners" in node03.text
    assert _one(vs, "fabric_node", "node02").state == "PASS"
    assert any("node03" in n for n in _one(vs, "fabric_node", "node02").notes)
    link = _one(vs, "fabric_link", "node02-node03")
    assert link.state == "FAIL" and link.nodes == ["node03"] and "follows from node03" in link.text


def test_a_partner_never_retested_is_spared_by_the_named_node():
    nodes, _, results = _slow_node_quick(retest_partner=False)
    vs = verdicts(nodes, results)
    assert _states(vs)[("fabric_node", "node03")] == "FAIL"
    node02 = _one(vs, "fabric_node", "node02")
    assert node02.state == "PASS" and node02.text.startswith("spared: paired only with node03")


def test_a_slow_link_fails_alone_and_both_its_nodes_pass():
    nodes = _names(8)
    results = _measure(_circle(nodes), link={frozenset(("node01", "node05")): 0.3})
    assert named_nodes(results) == set() and suspects(results) == set()
    vs = verdicts(nodes, results)
    assert {t for (c, t), s in _states(vs).items() if s != "PASS"} == {"node01-node05"}
    link = _one(vs, "fabric_link", "node01-node05")
    assert link.state == "FAIL" and link.nodes == ["node01", "node05"] and "the link, not either node" in link.text
    assert any("node05" in n for n in _one(vs, "fabric_node", "node01").notes)


def test_a_node_that_passed_once_is_never_failed_even_with_two_slow_partners():
    nodes = _names(8)
    slow_links = {frozenset(("node01", "node05")): 0.3, frozenset(("node01", "node06")): 0.3}
    results = _measure(_circle(nodes), link=slow_links)
    assert named_nodes(results) == set() and suspects(results) == set()
    vs = verdicts(nodes, results)
    assert {(c, t): s for (c, t), s in _states(vs).items() if s != "PASS"} == {
        ("fabric_link", "node01-node05"): "FAIL", ("fabric_link", "node01-node06"): "FAIL"}


def test_a_silent_node_fails_by_name_and_its_partners_pass():
    nodes = _names(8)
    first = _measure(_quick(nodes), silent={"node05"})
    assert suspects(first) == {"node04", "node05"}
    retest = _measure([[("node05", "node00"), ("node04", "node01")]], silent={"node05"}, phase="retest", start=1)
    vs = verdicts(nodes, first + retest)
    assert {t for (c, t), s in _states(vs).items() if s in ("FAIL", "WARN")} == {"node05", "node04-node05",
                                                                                  "node00-node05"}
    # no round of rails alone for a silent node: its pairs said rail by rail that every rail was silent
    nics = [v for v in vs if v.check == "fabric_nic"]
    assert nics and {v.state for v in nics} == {"SKIP"} and "the node, not one NIC" in nics[0].text
    node05 = _one(vs, "fabric_node", "node05")
    assert node05.state == "FAIL" and "returned nothing within the timeout" in node05.text and node05.value is None
    link = _one(vs, "fabric_link", "node04-node05")
    assert link.state == "FAIL" and link.nodes == ["node05"] and "follows from node05" in link.text


def test_a_silent_pair_never_retested_fails_naming_both_nodes():
    nodes = _names(8)
    vs = verdicts(nodes, _measure(_quick(nodes), silent={"node02"}))
    link = _one(vs, "fabric_link", "node02-node03")
    assert link.state == "FAIL" and link.nodes == ["node02", "node03"]
    assert "returned nothing within the timeout" in link.text and "node02 and node03" in link.text
    assert {t for (c, t), s in _states(vs).items() if s == "FAIL"} == {"node02-node03"}
    assert _states(vs)[("fabric_node", "node02")] == _states(vs)[("fabric_node", "node03")] == "WARN"


def test_a_slow_pair_not_retested_is_a_warning_never_a_failure():
    nodes = _names(8)
    vs = verdicts(nodes, _measure(_quick(nodes), node={"node06": 0.4}))
    assert {(c, t): s for (c, t), s in _states(vs).items() if s != "PASS"} == {
        ("fabric_node", "node06"): "WARN", ("fabric_node", "node07"): "WARN", ("fabric_link", "node06-node07"): "WARN"}
    link = _one(vs, "fabric_link", "node06-node07")
    assert link.text.startswith("not confirmed: ") and "re-test node06 and node07 with another partner" in link.text


def _with_rails(node: str, rails: dict[int, float | None]) -> list[PairResult]:
    nodes, _, results = _slow_node_quick(retest_partner=True)
    return results + [PairResult(2, node, "node00", "rail", None, None, {g: v}) for g, v in rails.items()]


def test_the_rail_retest_names_the_slow_and_the_silent_nic():
    rails = {g: 1.25 for g in range(RAILS)} | {2: 0.4, 6: None}
    vs = verdicts(_names(8), _with_rails("node03", rails))
    nics = {t: s for (c, t), s in _states(vs).items() if c == "fabric_nic"}
    assert nics == {f"node03:rail{g}": ("FAIL" if g in (2, 6) else "PASS") for g in range(RAILS)}
    assert _one(vs, "fabric_nic", "node03:rail2").gpu == 2 and "this NIC" in _one(vs, "fabric_nic", "node03:rail2").text
    assert "node03:rail2, node03:rail6" in _one(vs, "fabric_node", "node03").text


def test_every_rail_equally_low_names_the_node_and_no_nic():
    vs = verdicts(_names(8), _with_rails("node03", {g: 0.4 + 0.01 * g for g in range(RAILS)}))
    assert {s for (c, t), s in _states(vs).items() if c == "fabric_nic"} == {"PASS"}
    node03 = _one(vs, "fabric_node", "node03")
    assert node03.state == "FAIL" and "every rail alike" in node03.text and "not one NIC" in node03.text


def test_rails_of_a_node_not_named_give_no_nic_verdict():
    nodes = _names(8)
    results = _measure(_circle(nodes)) + [PairResult(9, "node01", "node00", "rail", None, None, {0: 0.1, 1: 3.0})]
    assert not [v for v in verdicts(nodes, results) if v.check == "fabric_nic"]


def test_the_envelope_floor_fails_what_the_fleet_alone_would_only_warn():
    nodes = _names(8)
    results = _measure(_circle(nodes), node={"node04": 0.85}, noise=0)
    assert set(failing(results)) == set() and named_nodes(results) == set()
    assert _states(verdicts(nodes, results))[("fabric_node", "node04")] == "WARN"
    floored = Limits(floor=22.0)
    assert named_nodes(results, floored) == {"node04"}
    assert all("below the floor 22" in why for why in failing(results, floored).values())
    v = _one(verdicts(nodes, results, floored), "fabric_node", "node04")
    assert v.state == "FAIL" and v.fail_at == 22.0 and "floor 22" in v.reference
    assert {v.state for v in verdicts(nodes, results, Limits(floor=20.0)) if "node04" not in v.nodes} == {"PASS"}


def test_a_pair_below_its_rounds_best_warns():
    nodes = _names(8)
    results = _measure(_circle(nodes), noise=0)
    results[0].busbw, results[1].busbw = BASE * 1.05, BASE * 0.95  # 0.95 of the median, 0.905 of its round's best
    found = slow(results)
    assert list(found) == [results[1].key] and "90 % of its round's best 26.25" in found[results[1].key]
    assert _states(verdicts(nodes, results))[("fabric_link", "-".join(results[1].link))] == "WARN"


def test_latency_above_the_factor_of_the_lowest_warns():
    nodes = _names(8)
    results = _measure(_circle(nodes), noise=0)
    results[3].latency_us = 10.0 * 2.2
    results[5].latency_us = 10.0 * 2.0
    assert list(slow(results)) == [results[3].key] and "2.2 × the lowest 10 µs" in slow(results)[results[3].key]
    vs = verdicts(nodes, results)
    assert {t for (c, t), s in _states(vs).items() if s != "PASS"} == {"-".join(results[3].link)}


def test_a_link_that_failed_once_and_passed_once_warns_as_intermittent():
    nodes = _names(8)
    results = _measure(_circle(nodes)) + _measure([[("node00", "node07")]], silent={"node07"}, start=7)
    v = _one(verdicts(nodes, results), "fabric_link", "node00-node07")
    assert v.state == "WARN" and v.text.startswith("intermittent: ") and "returned nothing" in v.text


def test_odd_cases_one_node_no_results_and_a_node_never_paired():
    assert [(v.target, v.state) for v in verdicts(["node00"], [])] == [("node00", "SKIP")]
    assert "one node" in verdicts(["node00"], [])[0].text
    assert {(v.target, v.state) for v in verdicts(_names(3), [])} == {(n, "SKIP") for n in _names(3)}
    assert verdicts([], []) == [] and slow([]) == {} and suspects([]) == set() and named_nodes([]) == set()
    nodes = _names(5)  # an odd count: node04 sat out the round
    vs = verdicts(nodes, _measure(_quick(nodes)))
    assert _one(vs, "fabric_node", "node04").state == "SKIP" and "no pair" in _one(vs, "fabric_node", "node04").text
    assert {v.state for v in vs if v.target != "node04"} == {"PASS"}


def test_simulated_verdicts_say_so_first():
    nodes, _, results = _slow_node_quick(retest_partner=True)
    vs = verdicts(nodes, results, simulated=True)
    assert all(v.simulated and v.text.startswith(f"{SIMULATED}: ") for v in vs)
    assert not any(v.simulated for v in verdicts(nodes, results))


def test_bad_inputs_say_what_is_wrong():
    with pytest.raises(ValueError, match="phase"):
        PairResult(0, "a", "b", "second", 1.0, None, {})
    with pytest.raises(ValueError, match="itself"):
        PairResult(0, "a", "a", "first", 1.0, None, {})
    with pytest.raises(ValueError, match="fail_fraction"):
        Limits(fail_fraction=0.95)
    with pytest.raises(ValueError, match="same pair in the same round"):
        verdicts(["a", "b"], [PairResult(0, "a", "b", "first", 1.0), PairResult(0, "a", "b", "first", 2.0)])


def test_a_node_slow_with_every_partner_is_named_in_one_line():
    nodes = _names(16)
    vs = verdicts(nodes, _measure(_circle(nodes), node={"node09": 0.4}))
    assert {t for (c, t), s in _states(vs).items() if s == "FAIL"} == {"node09"} | {
        "-".join(sorted((n, "node09"))) for n in nodes if n != "node09"}
    assert {v.state for v in vs if "node09" not in v.nodes} == {"PASS"}
    text = _one(vs, "fabric_node", "node09").text
    assert text.startswith("fails with 15 different partners") and text.endswith("; and 12 more)") and len(text) < 400
