"""One fabric check, end to end, in each rank the launcher started: join the group, learn who is on which node
and rail, read each node's NIC facts, take the rounds (the leader leads, the others follow), read the NIC facts
again, and, on the leader, judge and write the verdict and the rows."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from gpubench.check.fabric import pair_rounds, racks, record, schedule
from gpubench.check.fabric.board import Board
from gpubench.check.fabric.judge import Limits, verdicts
from gpubench.check.facts.nic_fields import NicSnapshot
from gpubench.check.verdicts import NodeVerdict, Verdict, mark_simulated
from gpubench.errors import UsageError
from gpubench.results.rundir import check_label, ensure_writable, utc_now

NOT_UNDER_A_LAUNCHER = ("gpubench check --fabric runs as one task per GPU under the launcher that holds the nodes: "
                        "srun --ntasks-per-node=<GPUs> gpubench check --fabric (or torchrun --nnodes N "
                        "--nproc-per-node <GPUs> -m gpubench check --fabric, or mpirun)")


@dataclass
class FabricRequest:
    mode: str = "quick"
    backend: str = "auto"
    out: str = "gpubench-check"
    cluster: str = "fabric"
    timeout_s: float = 60.0
    nbytes: int | None = None
    topology: str | None = None  # a topology file naming each node's rack
    floor: float | None = None  # an envelope's per-pair GB/s floor
    nic_rate_gbps: float | None = None
    seed: int = 0
    quiet: bool = False


def _join(req: FabricRequest) -> tuple[Any, Any, Any]:
    from gpubench.backends import backend_class, open_backend, resolve_name
    from gpubench.ranks import ending
    from gpubench.ranks.env import detect, share_host_cores
    from gpubench.ranks.group import Group

    renv = detect()
    if renv is None:
        raise UsageError(NOT_UNDER_A_LAUNCHER)
    name = resolve_name(req.backend)
    if name == "cpu":
        raise UsageError("--fabric measures GPUs' paths between nodes: use --backend cuda or hip on GPU nodes, or "
                         "--backend fake to try it on made-up ones (gloo does the sends)")
    gpu = name in ("cuda", "hip")
    count = backend_class(name).device_count() if gpu else 1
    if gpu and count < renv.local_world_size:
        raise UsageError(f"{renv.local_world_size} tasks on this node for its {count} GPUs: --fabric takes one task "
                         "per GPU (srun --ntasks-per-node equal to the GPUs a node has)")
    ending.install()
    share_host_cores(name, renv.local_world_size)
    backend = open_backend(name, renv.local_rank if gpu else 0)
    group = Group(renv, "nccl" if gpu else "gloo", req.timeout_s, device=backend.torch_device if gpu else None)
    return renv, backend, group


def run(req: FabricRequest, argv: list[str]) -> NodeVerdict | None:
    """The check in this rank: the leader's verdict (None on the other ranks)."""
    t0, started = time.monotonic(), utc_now()
    cluster = check_label(req.cluster)
    rack_of = racks.from_file(req.topology) if req.topology else {}
    renv, backend, group = _join(req)
    try:
        if group.rank == 0:
            ensure_writable(req.out, cluster)
        me = pair_rounds.whoami(renv, racks.from_slurm(os.environ))
        members = pair_rounds.node_names(group.gather_objects(me))
        nodes = list(dict.fromkeys(m.node for m in members))
        if len(nodes) < 2:  # nothing between nodes to measure: a PASS of its facts alone would say it was
            raise UsageError(f"--fabric measures between nodes and this step's {len(members)} task(s) are on one "
                             f"({nodes[0]}): run it across two nodes or more (srun --nodes=N)")
        run_id = group.gather_objects(f"{os.getpid()}-{int(time.time())}" if group.rank == 0 else None)[0]
        nbytes = req.nbytes or pair_rounds.EXCHANGE_BYTES.get(backend.name, pair_rounds.SMALL_BYTES)
        fab = pair_rounds.Fabric(members, Board(group, run_id), backend, nbytes, req.timeout_s, group.rank)
        first = {m.node: m.rank for m in reversed(members)}  # each node's lowest rank reads its NICs
        reader = first.get(next(m.node for m in members if m.rank == group.rank)) == group.rank
        before = _nics() if reader else None
        if group.rank != 0:
            pair_rounds.follow(fab)
            if reader:
                fab.board.put(f"nics/{members[group.rank].node}", _nic_verdicts(before, req))
            return None
        return _lead(fab, req, argv, cluster, rack_of, before, t0, started)
    finally:
        group.close()


def _lead(fab: pair_rounds.Fabric, req: FabricRequest, argv: list[str], cluster: str, rack_of: dict[str, str],
          before: NicSnapshot | None, t0: float, started: str) -> NodeVerdict:
    say = (lambda _m: None) if req.quiet else pair_rounds.say_to_stderr
    rack_of = rack_of or {m.node: m.rack for m in fab.members if m.rack}
    plan = schedule.plan(req.mode, fab.nodes, rack_of, req.seed)
    say(f"fabric of {len(fab.nodes)} nodes × {fab.rails} rails ({fab.backend.name}): "
        + schedule.describe(plan, pair_rounds.guess_round_s(fab.backend.name, fab.nbytes)))
    rd = record.open_run(req.out, cluster, argv, fab.backend.name,
                         {"mode": req.mode, "nodes": fab.nodes, "rails": fab.rails, "bytes": fab.nbytes,
                          "timeout_s": req.timeout_s, "rounds": [[list(p) for p in r] for r in plan.rounds]})
    limits = Limits(floor=req.floor)
    learnt = pair_rounds.lead(fab, plan, limits, say, req.seed)
    rows = _rows(fab, cluster, learnt)
    record.write(rd, rows)
    nics = {fab.members[0].node: _nic_verdicts(before, req)}
    deadline = time.monotonic() + pair_rounds.ANSWER_GRACE_S
    for node in fab.nodes[1:]:
        nics[node] = fab.board.get(f"nics/{node}", deadline)
    found = verdicts(fab.nodes, fab.results, limits, simulated=fab.backend.name == "fake")
    found += _nic_found(nics) + _all_reduce_verdict(learnt["all_reduce"], fab)
    if fab.backend.name == "fake":
        mark_simulated(found)
    node = NodeVerdict(host=f"fabric of {len(fab.nodes)} nodes", verdicts=found, started=started,
                       wall_s=round(time.monotonic() - t0, 1), backend=fab.backend.name, argv=list(argv),
                       run_dirs=[str(rd.path)],
                       phases=[{"what": f"round {a['round']} ({a['phase']})", "gpus": [], "wall_s": a["wall_s"],
                                "run_dirs": [str(rd.path)], "why": ""} for a in fab.answers])
    record.keep(rd, node)
    rd.finish("complete", cases_done=len({r["case"] for r in rows}))
    return node


def _rows(fab: pair_rounds.Fabric, cluster: str, learnt: dict[str, Any]) -> list[dict[str, Any]]:
    base = record.base_columns(fab.backend, cluster)
    ranks = {(m.node, m.rail): m.rank for m in fab.members}
    rows = []
    for r in fab.results:
        answers = fab.answers[r.round]["answers"]
        rows += record.pair_rows(base, r, answers, ranks, fab.nbytes)
    return rows + record.all_reduce_rows(base, learnt["all_reduce"], len(fab.nodes), len(fab.members))


def _nics() -> NicSnapshot:
    from gpubench.check.facts.readers import rdma

    return rdma.read(_sysfs())


def _sysfs() -> str | None:
    """GPUBENCH_FAKE_SYSFS may name a tree per simulated node: ``{node}`` in it is this node's name."""
    root = os.environ.get("GPUBENCH_FAKE_SYSFS")
    node = os.environ.get("SLURMD_NODENAME") or ""
    return root.replace("{node}", node) if root else None


def _nic_verdicts(before: NicSnapshot | None, req: FabricRequest) -> list[dict[str, Any]]:
    from gpubench.check.facts import nic_rules

    return [v.as_dict() for v in nic_rules.judge(before, _nics(), req.nic_rate_gbps)]


def _nic_found(nics: dict[str, list[dict[str, Any]] | None]) -> list[Verdict]:
    out = []
    for node, found in nics.items():
        if found is None:
            out.append(Verdict("nic_port", node, "FAIL", "its NIC facts did not come: the node's first rank is "
                               "silent", kind="fact", nodes=[node]))
            continue
        for d in found:
            d = {**d, "pair": tuple(d["pair"]) if d.get("pair") else None, "ci": None}
            v = Verdict(**d)
            v.target, v.nodes = node if v.target == "node" else f"{node}:{v.target}", [node]
            out.append(v)
    return out


def _all_reduce_verdict(reduced: dict[str, Any] | None, fab: pair_rounds.Fabric) -> list[Verdict]:
    if reduced is None:
        return []
    if "skip" in reduced:
        return [Verdict("fabric_all_reduce", "allocation", "SKIP", reduced["skip"], nodes=fab.nodes)]
    if "busbw" not in reduced:
        return [Verdict("fabric_all_reduce", "allocation", "FAIL", reduced.get("silent", "no answer"),
                        nodes=fab.nodes)]
    from statistics import median

    value = median(reduced["busbw"])
    return [Verdict("fabric_all_reduce", "allocation", "PASS",
                    f"{value:.2f} GB/s bus bandwidth over {len(fab.members)} ranks on {len(fab.nodes)} nodes "
                    "(reported beside the pairs; judged by them)", value=value, unit="GB/s", better="higher",
                    title="all_reduce over the allocation", nodes=fab.nodes)]


__all__ = ["FabricRequest", "run", "NOT_UNDER_A_LAUNCHER"]
