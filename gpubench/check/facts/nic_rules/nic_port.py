"""``nic_port``: an RDMA port that is not ACTIVE (DOWN, INIT, ARMED: not routed) or whose physical link is not
LinkUp (Polling: no cable or no peer; Disabled) FAILs, before or after the test; a port gone after the test FAILs.
As NHC's check_hw_ib (mej/nhc scripts/lbnl_hw.nhc) and Azure's health checks judge it."""

from __future__ import annotations

from gpubench.check.facts.nic_fields import NicSnapshot, Port
from gpubench.check.facts.nic_rules.common import unknown, verdict
from gpubench.check.verdicts import Verdict

CHECK, TITLE = "nic_port", "RDMA port state"
# The EFA driver hard-codes both (drivers/infiniband/hw/efa/efa_verbs.c, efa_query_port): they prove nothing there.
EFA_NOTE = "the EFA driver reports every port ACTIVE and LinkUp; its health shows in its counters and the pair tests"


def judge(before: NicSnapshot, after: NicSnapshot | None = None,
          expected_rate_gbps: float | None = None) -> list[Verdict]:
    return [_one(p, after.port(p.target) if after else None, after is not None) for p in before.ports]


def _one(p: Port, later: Port | None, read_after: bool) -> Verdict:
    notes = [EFA_NOTE] if p.kind == "efa" else []
    if read_after and later is None:
        return verdict(CHECK, p.target, "FAIL", "port gone after the test (device reset or removed)", TITLE, notes)
    for when, q in (("", p), (" after the test", later)):
        if q is None:
            continue
        bad = _bad(q)
        if bad:
            return verdict(CHECK, p.target, "FAIL", bad + when, TITLE, notes)
    if p.state is None or p.phys_state is None:
        why = unknown(p.why, "port", "state", "phys_state")
        return verdict(CHECK, p.target, "SKIP", f"port state not readable ({why})", TITLE, notes)
    return verdict(CHECK, p.target, "PASS", f"{p.state}, {p.phys_state}", TITLE, notes)


def _bad(q: Port) -> str | None:
    """What is wrong with ``q``'s state, or None where it is up or unknown."""
    down = q.state is not None and q.state != "ACTIVE"
    phys = q.phys_state is not None and q.phys_state != "LinkUp"
    if down and phys:
        return f"port {q.state}, physical link {q.phys_state}{_hint(q.phys_state)}"
    if down:
        return f"port {q.state} (physical link {q.phys_state or 'unknown'}): not routed by the subnet manager"
    if phys:
        return f"physical link {q.phys_state}{_hint(q.phys_state)} (port {q.state or 'unknown'})"
    return None


def _hint(phys: str) -> str:
    return {"Polling": ": no cable or no peer", "Disabled": ": disabled"}.get(phys, "")
