"""One node's check, end to end: start a station per GPU, read the GPUs' health facts while the stations measure,
judge every figure and fact, and keep the verdict beside the figures (``check.json`` in the per-GPU run's
directory)."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench.backends import backend_class, resolve_name
from gpubench.check import checkset, drive, envelope, facts, node_history as history, visible
from gpubench.check.outputs import json_
from gpubench.check.judge import SHARED_NOTE, Judge, pids_in
from gpubench.check.verdicts import (FORMAT, FORMAT_VERSION, HISTORY, OUT, NodeVerdict, Verdict,
                                     mark_simulated)
from gpubench.check.stations import Pool
from gpubench.errors import UsageError
from gpubench.results.destination import write_text
from gpubench.run.devices import parse_devices
from gpubench.results.rundir import check_label, ensure_writable, utc_now

VERDICT_FILE = history.VERDICT_FILE
CPU_REFUSAL = ("gpubench check judges GPUs and the cpu backend has none: on a GPU node use --backend cuda or hip "
               "(auto finds them); --backend fake runs the check on made-up GPUs, to try the command and its outputs "
               "(every verdict is marked simulated), never to judge this machine")


@dataclass
class Request:
    backend: str = "auto"
    devices: str = "all"
    out: str = OUT
    cluster: str | None = None  # this node's label (the command gives the host name by default)
    expect: str | None = None  # a file, "none", "history", or None (the shipped envelope matching the GPU)
    fleet: str | None = None  # a directory of other nodes' check runs: their figures are peers too
    strict: bool = False
    retry: bool = True
    quiet: bool = False  # no "check: ..." lines on stderr
    checks: str | None = None  # another check set (a TOML file like gpubench/check/checks.toml)


def _resolve(req: Request) -> tuple[str, list[int]]:
    if req.backend in ("auto", "cuda"):
        count = visible.cuda_count()  # NVML's count: torch is imported by the stations, in parallel (visible.py)
        if count:
            return "cuda", parse_devices(req.devices, count)
    name = resolve_name(req.backend)
    cls = backend_class(name)
    ok, why = cls.available()
    if not ok:
        raise UsageError(f"backend {name!r} is not available: {why}")
    if name == "cpu":
        raise UsageError(CPU_REFUSAL)
    return name, parse_devices(req.devices, cls.device_count())


def _identities(devices: list[int], pool: Pool) -> list[dict[str, Any]]:
    """Index, name, uuid and PCI bus id of each GPU, and the CPUs its station was bound to, as the stations found
    them; unknown (None) for a GPU whose station could not start."""
    out = []
    for i in devices:
        ready = pool.ready.get(i) or {}
        gpu = {"index": i, "name": None, "uuid": None, "pci_bus_id": None, **(ready.get("gpu") or {})}
        out.append({**gpu, "binding": ready.get("binding")})
    return out


def _measure(plan: drive.Plan, say) -> tuple[list[dict[str, Any]], dict, dict, float, list[checkset.Evidence]]:
    """The stations' measurements, with the health facts read meanwhile: (gpus, static facts, facts seen, how long
    the stations took to start, the figures)."""
    with Pool(plan.backend, plan.devices, plan.env) as pool:
        say(f"starting a measuring process on each of {len(plan.devices)} GPU(s)")
        t0 = time.monotonic()
        # The tables' reader (pandas, pyarrow) is imported while the stations start, which takes them longer (torch,
        # the device): the check reads their tables at the end, and paid for that import after them (in its first
        # round, for the suites).
        from gpubench import results  # noqa: F401
        drive.suites_of(plan)  # so are the suites that the requests it sends its stations hold (torch)
        pool.start()
        start_s = time.monotonic() - t0
        gpus = _identities(plan.devices, pool)
        reader = facts.open_facts(plan.backend, [(g["index"], g["uuid"], g["pci_bus_id"]) for g in gpus])
        with reader:
            static = {g["index"]: reader.static(g["index"]) for g in gpus}
            with facts.FactsWatch(reader, plan.devices, lambda: facts.process_tree(os.getpid())) as watch:
                drive.measure(plan, pool, say)
            seen = {i: watch.seen(i) for i in plan.devices}
        pool.hang_up()  # the stations end (their torch and device teardown) while the check reads their tables
        evidence = drive.evidence(plan)
    return gpus, static, seen, start_s, evidence


def run(req: Request, argv: list[str]) -> NodeVerdict:
    t0, started = time.monotonic(), utc_now()
    backend, devices = _resolve(req)
    cluster = check_label(req.cluster or "local")
    chosen = envelope.for_device(None, req.expect) if req.expect not in (None, HISTORY) else None  # bad file: now
    fleet_dir = Path(req.fleet) if req.fleet else None
    if fleet_dir is not None and not fleet_dir.is_dir():
        raise UsageError(f"--fleet {req.fleet}: no such directory (give the folder the nodes' check runs are in)")
    ensure_writable(req.out, cluster)
    plan = drive.Plan(backend, devices, req.out, cluster, checkset.load(req.checks or checkset.CHECKS_FILE))
    say = (lambda _m: None) if req.quiet else (lambda m: print(f"check: {m}", file=sys.stderr, flush=True))
    gpus, static, seen, start_s, evidence = _measure(plan, say)
    _name_gpus(gpus, evidence)
    host = _host_class(plan)
    env = chosen if req.expect not in (None, HISTORY) else _envelope(req, _model(gpus), cluster, say)
    foreign = {i: dict(seen[i].get("foreign") or {}) for i in devices}
    judge = Judge(env, retry=(lambda ev: drive.retry(plan, ev)) if req.retry else None,
                  fleet=fleet_peers(fleet_dir, _model(gpus), cluster) if fleet_dir else None,
                  links={i: envelope.pcie_gbps(static[i].get("pcie_max_gen"), static[i].get("pcie_max_width"))
                         for i in devices}, foreign=foreign, host=host, gpus=len(devices))
    if evidence:
        say(f"judging {len(evidence)} figures and the health facts of {len(devices)} GPU(s)")
    verdicts = judge.all(evidence) + _too_few(plan) + _facts(devices, static, seen, evidence)
    if backend == "fake":
        mark_simulated(verdicts)
    node = NodeVerdict(host=cluster, verdicts=verdicts, gpus=gpus,
                       run_dirs=[c.run_dir for c in plan.children if c.run_dir], started=started,
                       wall_s=round(time.monotonic() - t0, 1), backend=backend, argv=list(argv), strict=req.strict,
                       host_class=host, phases=[{"what": "start", "gpus": devices, "wall_s": round(start_s, 2),
                                                 "run_dirs": [], "why": ""}, *drive.phases(plan)])
    _keep(node, plan)
    return node


def _host_class(plan: drive.Plan) -> str | None:
    """The class of this host (its CPU model), as the check's first run recorded it."""
    for c in plan.children:
        if c.run_dir:
            try:
                meta = json.loads((Path(c.run_dir) / "run.json").read_text())
            except (OSError, ValueError):
                continue
            return history.host_class(meta.get("fingerprint"))
    return None


def _envelope(req: Request, model: str | None, cluster: str, say) -> envelope.Envelope | None:
    """The shipped envelope of the GPU model; with --expect history, this node's own history first."""
    shipped = envelope.for_device(model, None)
    if req.expect != HISTORY:
        return shipped
    own, why = history.own(Path(req.out) / cluster, cluster, model)
    if own is None:
        say(f"{why}: {'the shipped envelope' if shipped else 'the spec fallback and peers'} hold every figure")
        return shipped
    say(f"{own.source}: it holds {', '.join(own.entries)}")
    return envelope.merged(own, shipped)


def _model(gpus: list[dict[str, Any]]) -> str | None:
    return next((g["name"] for g in gpus if g.get("name")), None)


def _name_gpus(gpus: list[dict[str, Any]], evidence: list[checkset.Evidence]) -> None:
    """Fill what the rows know of each GPU (the fake backend's name, a uuid torch did not give)."""
    for g in gpus:
        row = next((e.row for e in evidence if e.gpu == g["index"] and e.row is not None), None)
        if row:
            g["name"] = g["name"] or row.get("device")
            g["uuid"] = g["uuid"] or row.get("gpu_uuid")
            g["pci_bus_id"] = g["pci_bus_id"] or row.get("pci_bus_id")


def _too_few(plan: drive.Plan) -> list[Verdict]:
    n = len(plan.devices)
    return [Verdict(check=f.key, target="node", state="SKIP", title=f.title,
                    text=f"needs {f.needs} GPUs; this check has {n}") for f in drive.needs_more(plan)]


def _facts(devices: list[int], static: dict, seen: dict, evidence: list[checkset.Evidence]) -> list[Verdict]:
    out = []
    for i in devices:
        rows = [e.row for e in evidence if e.gpu == i and e.row is not None]
        throttle = {t.strip() for r in rows for t in str(r.get("throttle") or "").split(",") if t.strip()}
        known = [r.get("contended") for r in rows if r.get("contended") is not None]
        row_pids = {p: n for c in known for p, n in pids_in(str(c)).items()} if known else None
        out += facts.judge(i, static[i], seen[i], throttle, row_pids)
    return out


def _keep(node: NodeVerdict, plan: drive.Plan) -> None:
    """The verdict beside the per-GPU figures (or the first run that has a directory)."""
    home = next((c.run_dir for c in plan.children if c.what in ("devices", "single") and c.run_dir), None) or \
        next((c.run_dir for c in plan.children if c.run_dir), None)
    if home:
        write_text(Path(home) / VERDICT_FILE, json_.check(node))


def fleet_peers(root: Path, model: str | None, host: str) -> dict[str, list[float]]:
    """Figures of other nodes' check runs under ``root`` on GPUs of the same model, per check key."""
    out: dict[str, list[float]] = {}
    for doc in read_all(root):
        if doc.get("host") == host:
            continue
        names = {g.get("name") for g in doc.get("gpus", [])}
        if model and names and model not in names:
            continue
        for check, value in peer_figures(doc):
            out.setdefault(check, []).append(value)
    return out


def peer_figures(doc: dict[str, Any]) -> list[tuple[str, float]]:
    """(check, figure) of a stored verdict's measured figures that may stand as peers for other nodes: not one
    measured while another process shared its GPU."""
    out = []
    for v in doc.get("verdicts", []):
        shared = any(str(n).startswith(SHARED_NOTE) for n in v.get("notes") or [])
        if v.get("kind") == "performance" and isinstance(v.get("value"), (int, float)) and not shared:
            out.append((v["check"], float(v["value"])))
    return out


def read_all(root: Path) -> list[dict[str, Any]]:
    """Every check verdict under ``root``, the newest per host."""
    newest: dict[str, tuple[str, dict[str, Any]]] = {}
    for path in sorted(Path(root).rglob(VERDICT_FILE)):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if doc.get("format") != FORMAT:
            continue
        if not isinstance(doc.get("version"), int) or doc["version"] > FORMAT_VERSION:
            raise UsageError(f"{path} is a check verdict of version {doc.get('version')}, newer than this gpubench "
                             f"reads ({FORMAT_VERSION}): upgrade gpubench")
        host, when = str(doc.get("host")), str(doc.get("started") or "")
        if host not in newest or when >= newest[host][0]:
            newest[host] = (when, {**doc, "_path": str(path)})
    return [d for _, d in sorted(newest.values(), key=lambda x: x[1]["host"])]


__all__ = ["Request", "run", "fleet_peers", "peer_figures", "read_all", "VERDICT_FILE", "OUT", "HISTORY",
           "CPU_REFUSAL"]
