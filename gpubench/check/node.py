"""One node's check, end to end: read its health facts while the children measure, judge every figure and fact,
and keep the verdict beside the figures (``check.json`` in the per-GPU run's directory)."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench.backends import backend_class, resolve_name
from gpubench.check import checkset, drive, envelope, facts
from gpubench.check.formats import to_json
from gpubench.check.judge import SHARED_NOTE, Judge, pids_in
from gpubench.check.model import FORMAT, FORMAT_VERSION, NodeVerdict, Verdict
from gpubench.errors import UsageError
from gpubench.outputs import write_text
from gpubench.ranks.fleet import parse_devices
from gpubench.rundir import check_label, ensure_writable, utc_now

VERDICT_FILE = "check.json"


@dataclass
class Request:
    backend: str = "auto"
    devices: str = "all"
    out: str = "results"
    cluster: str | None = None  # this node's label (the command gives the host name by default)
    expect: str | None = None  # a file, "none", or None (the shipped envelope matching the GPU)
    fleet: str | None = None  # a directory of other nodes' check runs: their figures are peers too
    strict: bool = False
    retry: bool = True
    quiet: bool = False  # no "check: ..." lines on stderr (the children's progress still shows)
    checks: str | None = None  # another check set (a TOML file like gpubench/check/checks.toml)


def _identities(backend: str, devices: list[int]) -> list[dict[str, Any]]:
    """Index, name, uuid and PCI bus id of each GPU, read without a context in this process (the children make
    theirs); name None where the backend cannot say before it runs."""
    out = []
    for i in devices:
        gpu: dict[str, Any] = {"index": i, "name": None, "uuid": None, "pci_bus_id": None}
        if backend in ("cuda", "hip"):
            try:
                import torch  # the cuda and hip backends only: torch takes seconds to import

                p = torch.cuda.get_device_properties(i)
                gpu["name"] = p.name
                gpu["uuid"] = str(p.uuid) if getattr(p, "uuid", None) is not None else None
                if hasattr(p, "pci_bus_id"):
                    gpu["pci_bus_id"] = f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
            except Exception:  # noqa: BLE001 — the facts reader then finds the GPU by index
                pass
        out.append(gpu)
    return out


def _resolve(req: Request) -> tuple[str, list[int]]:
    name = resolve_name(req.backend)
    cls = backend_class(name)
    ok, why = cls.available()
    if not ok:
        raise UsageError(f"backend {name!r} is not available: {why}")
    if name == "cpu":
        raise UsageError("gpubench check judges GPUs: the cpu backend has none (use --backend cuda, hip or fake)")
    return name, parse_devices(req.devices, cls.device_count())


def run(req: Request, argv: list[str]) -> NodeVerdict:
    t0, started = time.monotonic(), utc_now()
    backend, devices = _resolve(req)
    cluster = check_label(req.cluster or "local")
    chosen = envelope.for_device(None, req.expect) if req.expect else None  # a bad file fails before measuring
    fleet_dir = Path(req.fleet) if req.fleet else None
    if fleet_dir is not None and not fleet_dir.is_dir():
        raise UsageError(f"--fleet {req.fleet}: no such directory (give the folder the nodes' check runs are in)")
    ensure_writable(req.out, cluster)
    plan = drive.Plan(backend, devices, req.out, cluster, checkset.load(req.checks or checkset.CHECKS_FILE))
    gpus = _identities(backend, devices)
    say = (lambda _m: None) if req.quiet else (lambda m: print(f"check: {m}", file=sys.stderr, flush=True))
    reader = facts.open_facts(backend, [(g["index"], g["uuid"], g["pci_bus_id"]) for g in gpus])
    with reader:
        static = {g["index"]: reader.static(g["index"]) for g in gpus}
        with facts.FactsWatch(reader, devices, lambda: facts.process_tree(os.getpid())) as watch:
            drive.measure(plan, say)
        seen = {i: watch.seen(i) for i in devices}
    evidence = drive.evidence(plan)
    _name_gpus(gpus, evidence)
    env = chosen if req.expect else envelope.for_device(_model(gpus), None)
    foreign = {i: dict(seen[i].get("foreign") or {}) for i in devices}
    judge = Judge(env, retry=(lambda ev: drive.retry(plan, ev)) if req.retry else None,
                  fleet=fleet_peers(fleet_dir, _model(gpus), cluster) if fleet_dir else None,
                  links={i: envelope.pcie_gbps(static[i].get("pcie_max_gen"), static[i].get("pcie_max_width"))
                         for i in devices}, foreign=foreign)
    if evidence:
        say(f"judging {len(evidence)} figures and the health facts of {len(devices)} GPU(s)")
    verdicts = judge.all(evidence) + _too_few(plan) + _facts(devices, static, seen, evidence)
    node = NodeVerdict(host=cluster, verdicts=verdicts, gpus=gpus,
                       run_dirs=[c.run_dir for c in plan.children if c.run_dir], started=started,
                       wall_s=round(time.monotonic() - t0, 1), backend=backend, argv=list(argv), strict=req.strict)
    _keep(node, plan)
    return node


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
    home = next((c.run_dir for c in plan.children if c.what == "devices" and c.run_dir), None) or \
        next((c.run_dir for c in plan.children if c.run_dir), None)
    if home:
        write_text(Path(home) / VERDICT_FILE, to_json(node))


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


__all__ = ["Request", "run", "fleet_peers", "peer_figures", "read_all", "VERDICT_FILE"]
