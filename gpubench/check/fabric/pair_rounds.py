"""``gpubench check --fabric``: every rank of the launcher's step (one task per GPU) joins one group; rank 0 leads.
The leader lays out rounds of disjoint node pairs (:mod:`.schedule`) and posts each round on the board
(:mod:`.board`); in a round, GPU g of each node of a pair exchanges with GPU g of the other (every rail at once, or one
rail where a suspect node's NIC is looked for) and posts its samples; the leader folds them into pair figures,
re-tests suspects with known-good partners, names nodes, NICs and links (:mod:`.judge`), and writes the rows and the
verdict (:mod:`.record`). A rank that hears nothing from its partner within the timeout says so; a rank that says
nothing by the round's deadline is silent: nobody waits longer.
"""

from __future__ import annotations

import os
import socket
from statistics import median
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpubench.backends.base import Backend
from gpubench.check.fabric import exchange, schedule
from gpubench.check.fabric.board import Board
from gpubench.check.fabric.judge import Limits, PairResult, named_nodes, suspects
from gpubench.ranks.env import RankEnv

# How long past a round's own timeout the leader waits for a rank's answer (a loaded host posts late).
ANSWER_GRACE_S = 5.0
# A suspect re-tested with a known-good partner: how long silence is waited for (a good pair answers in well under a
# second; the first silence already cost the whole --timeout).
RETEST_WAIT_S = 5.0
# Bytes each rank sends its partner per exchange: on GPUs enough to run a NIC at its rate for milliseconds (nccl-tests'
# sendrecv reaches its plateau by 64-256 MiB); elsewhere small, so that tests stay quick.
EXCHANGE_BYTES = {"cuda": 256 << 20, "hip": 256 << 20}
SMALL_BYTES = 1 << 20
# What a rail is guessed to move, for the time a plan prints before it starts (about; the rounds say the truth).
GUESS_GBPS = {"cuda": 25.0, "hip": 25.0, "fake": 100.0, "cpu": 1.0}


@dataclass(frozen=True)
class Member:
    rank: int
    node: str
    rail: int
    rack: str | None = None


@dataclass
class Fabric:
    """The rounds' shared state: who is where, and what every round returned (the leader's)."""

    members: list[Member]
    board: Board
    backend: Backend
    nbytes: int
    timeout_s: float
    me: int
    results: list[PairResult] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)  # per round: {rank: answer}, for the rows
    rounds: int = 0
    gone: set[str] = field(default_factory=set)  # nodes a rank of which answered nothing by a deadline

    @property
    def nodes(self) -> list[str]:
        return list(dict.fromkeys(m.node for m in self.members))

    @property
    def rails(self) -> int:
        return min(sum(m.node == n for m in self.members) for n in self.nodes)

    def rank_of(self, node: str, rail: int) -> int | None:
        return next((m.rank for m in self.members if m.node == node and m.rail == rail), None)


def node_names(rows: Sequence[dict[str, Any]]) -> list[Member]:
    """Each rank's node and rail, from what each said of itself: its node's name (SLURMD_NODENAME, else its host's)
    and its node number; names shared by different node numbers (simulated nodes on one host) get the number."""
    ids: dict[str, set[int]] = {}
    for r in rows:
        ids.setdefault(r["name"], set()).add(r["node_id"])
    named = [(r, r["name"] if len(ids[r["name"]]) == 1 else f"{r['name']}-n{r['node_id']}") for r in rows]
    # A rail is a rank's place among its node's ranks (by the launcher's local rank), not the local rank itself:
    # a launcher that numbers one host's ranks 0..7 for two simulated nodes of 4 still gives each node rails 0..3.
    rails = {}
    for node in dict.fromkeys(n for _, n in named):
        mine = sorted((r["rail"], r["rank"]) for r, n in named if n == node)
        rails.update({rank: k for k, (_, rank) in enumerate(mine)})
    return [Member(r["rank"], n, rails[r["rank"]], r.get("rack")) for r, n in named]


def whoami(renv: RankEnv, rack: str | None) -> dict[str, Any]:
    env = os.environ
    node_id = next((int(env[k]) for k in ("SLURM_NODEID", "GROUP_RANK") if env.get(k, "").isdigit()),
                   renv.rank // max(1, renv.local_world_size))
    return {"rank": renv.rank, "name": env.get("SLURMD_NODENAME") or socket.gethostname(), "node_id": node_id,
            "rail": renv.local_rank, "rack": rack}


def act(fab: Fabric, k: int, spec: dict[str, Any]) -> None:
    """This rank's part of round ``k``: its exchange where its node is in a pair and its rail is asked for, its
    answer on the board (samples, or why none)."""
    me = next(m for m in fab.members if m.rank == fab.me)
    rails = spec.get("rails")
    pair = next((p for p in spec["pairs"] if me.node in p), None)
    if pair is None or (rails is not None and me.rail not in rails):
        return
    other = pair[1] if pair[0] == me.node else pair[0]
    peer = fab.rank_of(other, me.rail)
    if peer is None:
        fab.board.put(f"answer/{k}/{fab.me}", {"error": f"{other} has no rail {me.rail}"})
        return
    leg = exchange.Leg(peer, me.rail, (me.node, other), k + 1)
    wait = spec.get("wait_s") or fab.timeout_s
    try:
        answer: dict[str, Any] = exchange.measure(fab.backend, leg, fab.nbytes, wait, fab.me)
    except exchange.Silent as e:
        answer = {"silent": str(e)}
    except ValueError as e:  # the data arrived wrong: a figure of it would be a lie
        answer = {"error": str(e)}
    fab.board.put(f"answer/{k}/{fab.me}", answer)


def follow(fab: Fabric) -> None:
    """A rank's rounds, as the leader posts them, until it posts the end (or stops posting: it is gone)."""
    k = 0
    while True:
        spec = fab.board.get(f"round/{k}", time.monotonic() + fab.timeout_s * 3 + 60)
        if spec is None or spec.get("end"):
            return
        if spec.get("phase") == "all_reduce":
            fab.board.put(f"answer/{k}/{fab.me}", all_reduce(fab))
        else:
            act(fab, k, spec)
        k += 1


def all_reduce(fab: Fabric) -> dict[str, Any]:
    """Every rank's samples of an all_reduce over the whole allocation, at the exchange's size."""
    import datetime as dt

    import torch
    import torch.distributed as dist

    from gpubench.suite import Workload
    from gpubench.timing.fixed import fixed_count

    wait = dt.timedelta(seconds=fab.timeout_s)
    t = torch.randn(max(1, fab.nbytes // 4), generator=torch.Generator().manual_seed(fab.me)).to(
        str(fab.backend.torch_device))

    def run(x: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(x, async_op=True).wait(wait)
        return x

    try:
        samples = fixed_count(fab.backend, Workload(run=run, make_inputs=lambda: t, bytes=t.numel() * 4), t,
                              warmup=exchange.WARMUP, iters=exchange.ITERS)
    except Exception as e:  # noqa: BLE001 — a rank that never joined it: said, not waited on
        return {"silent": f"all_reduce did not complete within {fab.timeout_s:g} s ({type(e).__name__})"}
    return {"bytes": t.numel() * 4, "samples": samples}


def run_round(fab: Fabric, phase: str, pairs: Sequence[tuple[str, str]], rails: list[int] | None = None,
              wait_s: float | None = None) -> list[PairResult]:
    """Post round ``fab.rounds``, take this rank's part, gather the answers by the deadline, fold them per pair."""
    k, t0 = fab.rounds, time.monotonic()
    fab.rounds += 1
    # A node a rank of which said nothing at all by a deadline (stopped, killed, hung) is not asked again: each round
    # with it would cost the whole wait once more. Its pairs are silent without a word.
    posted = [p for p in pairs if not fab.gone & set(p)]
    spec = {"phase": phase, "pairs": [list(p) for p in posted], "rails": rails, "wait_s": wait_s}
    fab.board.put(f"round/{k}", spec)
    act(fab, k, spec)
    asked = [m for m in fab.members if any(m.node in p for p in posted) and (rails is None or m.rail in rails)]
    deadline = time.monotonic() + (wait_s or fab.timeout_s) + ANSWER_GRACE_S
    answers = {m.rank: fab.board.get(f"answer/{k}/{m.rank}", deadline) for m in asked}
    fab.gone |= {m.node for m in asked if answers[m.rank] is None}
    fab.answers.append({"round": k, "phase": phase, "pairs": spec["pairs"], "rails": rails, "answers": answers,
                        "wall_s": round(time.monotonic() - t0, 2)})
    out = [fold(fab, k, phase, a, b, rails, answers) for a, b in pairs]
    fab.results += out
    return out


def fold(fab: Fabric, k: int, phase: str, a: str, b: str, rails: list[int] | None,
         answers: dict[int, Any]) -> PairResult:
    """One pair's figure from its ranks' answers: each rail's busbw per iteration is the bytes over the slower
    side's time; the pair's is the sum over its rails (None where any rail is silent: the rails say which)."""
    per_rail: dict[int, float | None] = {}
    latency = 0.0
    for rail in (rails if rails is not None else range(fab.rails)):
        sides = [answers.get(fab.rank_of(n, rail)) for n in (a, b)]
        if any(s is None or "samples" not in s for s in sides):
            per_rail[rail] = None
            continue
        per_rail[rail] = median(exchange.busbw_samples(*sides))
        latency = max(latency, *(median(s["latency"]) * 1e6 for s in sides))
    silent = any(v is None for v in per_rail.values())
    busbw = None if silent or not per_rail else sum(v for v in per_rail.values() if v is not None)
    return PairResult(k, a, b, phase, busbw, None if silent else latency, per_rail)


def lead(fab: Fabric, plan: schedule.Plan, limits: Limits, say: Callable[[str], None], seed: int = 0) -> dict[str, Any]:
    """Every round, in order: the plan's, the suspects' second pass, the named nodes' rails one at a time, the whole
    allocation's all_reduce; then the end. Returns what the leader learnt besides the pair results."""
    for i, pairs in enumerate(plan.rounds, 1):
        say(f"fabric round {i}/{len(plan.rounds)}: {len(pairs)} node pairs")
        run_round(fab, "first", pairs)
    second = second_pass(fab, limits, seed)
    for i, pairs in enumerate(second, 1):
        say(f"fabric second pass {i}/{len(second)}: {', '.join('-'.join(p) for p in pairs)}")
        run_round(fab, "retest", pairs, wait_s=min(fab.timeout_s, RETEST_WAIT_S))
    nic_rounds(fab, limits, say)
    reduced = None
    if any(r.busbw is None for r in fab.results):
        reduced = {"skip": "a node pair returned nothing: an all_reduce over every rank would wait on it"}
    elif len(fab.nodes) > 1:
        say(f"fabric all_reduce over {len(fab.members)} ranks on {len(fab.nodes)} nodes")
        reduced = all_reduce_round(fab)
    fab.board.put(f"round/{fab.rounds}", {"end": True})
    return {"all_reduce": reduced, "second_pass": len(second)}


def second_pass(fab: Fabric, limits: Limits, seed: int) -> list[schedule.Round]:
    sus = suspects(fab.results, limits)
    if not sus:
        return []
    good = [n for n in fab.nodes if n not in sus]
    tried = {frozenset((r.a, r.b)) for r in fab.results}
    return schedule.second_pass(sorted(sus, key=fab.nodes.index), good, tried, seed)


def nic_rounds(fab: Fabric, limits: Limits, say: Callable[[str], None]) -> None:
    """A named slow node's rails, one round per rail (a rail alone has the node's PCIe and switch ports to itself: a slow
    one shows as slow). A silent node needs none: its pairs' answers were rail by rail."""
    named = [n for n in fab.nodes if n in named_nodes(fab.results, limits)]
    bad = {x for r in fab.results for x in (r.a, r.b) if x in named}
    good = [n for n in fab.nodes if n not in bad and any(r.busbw is not None and n in (r.a, r.b)
                                                          and not ({r.a, r.b} & bad) for r in fab.results)]
    if not named or not good:
        return
    pairs = [(n, good[i % len(good)]) for i, n in enumerate(named)][:len(good)]
    if fab.rails == 1 or any(r.busbw is None and {r.a, r.b} & set(named) for r in fab.results):
        return  # one rail is the node; a silent node's pairs already said which of its rails were silent
    for rail in range(fab.rails):
        say(f"fabric rail {rail} of {', '.join(n for n, _ in pairs)} alone")
        run_round(fab, "rail", pairs, [rail], wait_s=min(fab.timeout_s, RETEST_WAIT_S))


def all_reduce_round(fab: Fabric) -> dict[str, Any]:
    k = fab.rounds
    fab.rounds += 1
    fab.board.put(f"round/{k}", {"phase": "all_reduce", "pairs": []})
    mine = all_reduce(fab)
    deadline = time.monotonic() + fab.timeout_s + ANSWER_GRACE_S
    answers = {m.rank: (mine if m.rank == fab.me else fab.board.get(f"answer/{k}/{m.rank}", deadline))
               for m in fab.members}
    if any(a is None or "samples" not in a for a in answers.values()):
        why = next((a.get("silent") for a in answers.values() if a and "silent" in a), "a rank did not answer")
        return {"silent": why}
    n = len(fab.members)
    slowest = [max(xs) for xs in zip(*(a["samples"] for a in answers.values()))]
    factor = 2 * (n - 1) / n  # nccl-tests' all_reduce busbw factor
    return {"bytes": mine["bytes"], "samples": slowest,
            "busbw": [mine["bytes"] / s / 1e9 * factor for s in slowest]}


def guess_round_s(backend: str, nbytes: int) -> float:
    """About how long a round takes, for the plan's line: its exchanges at a guessed rate, and a second of overhead."""
    calls = 1 + exchange.WARMUP + exchange.ITERS
    return calls * nbytes / (GUESS_GBPS.get(backend, 1.0) * 1e9) + 1.0


def say_to_stderr(message: str) -> None:
    print(f"check: {message}", file=sys.stderr, flush=True)


__all__ = ["Member", "Fabric", "node_names", "whoami", "follow", "lead", "run_round", "fold", "guess_round_s",
           "EXCHANGE_BYTES", "SMALL_BYTES"]
