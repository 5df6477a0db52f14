"""``nic_rate``: a port's rate (width x speed, "400 Gb/sec (4X NDR)") below the expected (an envelope's
``nic_rate_gbps``) FAILs: it trained down, to fewer lanes or a slower speed. Without an expectation a port below the
node's highest rate among ports of its kind (InfiniBand, RoCE, EFA) WARNs, and the others PASS with a note that no
rate was expected. A port that is not up is the port rule's FAIL; its rate means nothing and SKIPs."""

from __future__ import annotations

from collections import Counter

from gpubench.check.facts.nic_fields import NicSnapshot, Port
from gpubench.check.facts.nic_rules.common import unknown, verdict
from gpubench.check.verdicts import Verdict

CHECK, TITLE = "nic_rate", "RDMA port rate"
_KIND = {"ib": "InfiniBand", "roce": "RoCE", "efa": "EFA", "unknown": "unknown link layer"}


def judge(before: NicSnapshot, after: NicSnapshot | None = None,
          expected_rate_gbps: float | None = None) -> list[Verdict]:
    # The later reading where there is one: a port that retrained during the test is judged as it ended.
    ports = [(after.port(p.target) if after else None) or p for p in before.ports]
    best = {k: max((p.rate_gbps for p in ports if p.kind == k and p.rate_gbps and _up(p)), default=None)
            for k in {p.kind for p in ports}}
    fabric = _fabric_kind(ports)
    return [_one(p, expected_rate_gbps if p.kind == fabric else None, best[p.kind],
                 expected_rate_gbps is not None and p.kind != fabric) for p in ports]


def _one(p: Port, expected: float | None, best: float | None, other_kind: bool) -> Verdict:
    rate, kind = p.rate_gbps, _KIND[p.kind]
    ev = {"value": rate, "unit": "Gb/s", "better": "higher", "fail_at": expected}
    if not _up(p):
        return verdict(CHECK, p.target, "SKIP", "port not up: its rate means nothing (see nic_port)", TITLE, **ev)
    if rate is None:
        why = unknown(p.why, "rate", "rate_gbps")
        return verdict(CHECK, p.target, "SKIP", f"rate not readable ({why})", TITLE, **ev)
    if expected is not None:
        if rate < expected:
            return verdict(CHECK, p.target, "FAIL", f"trained down: {rate:g} of {expected:g} Gb/s ({p.rate})",
                           TITLE, **ev)
        return verdict(CHECK, p.target, "PASS", f"{rate:g} Gb/s (expected {expected:g})", TITLE, **ev)
    if best is not None and rate < best:
        return verdict(CHECK, p.target, "WARN", f"{rate:g} Gb/s, below the {best:g} Gb/s of this node's other "
                       f"{kind} ports: trained down?", TITLE, [_no_expectation(other_kind)], **ev)
    return verdict(CHECK, p.target, "PASS", f"{rate:g} Gb/s ({p.rate})", TITLE, [_no_expectation(other_kind)], **ev)


def _up(p: Port) -> bool:
    return p.state in (None, "ACTIVE") and p.phys_state in (None, "LinkUp")


def _fabric_kind(ports: list[Port]) -> str | None:
    """The kind most ports are: the fabric the expected rate is about. A node's odd port out (a front-end or storage
    NIC beside 8 fabric ports) is held to its own kind's best instead, or a healthy node would FAIL."""
    counts = Counter(p.kind for p in ports).most_common()
    return counts[0][0] if counts else None


def _no_expectation(other_kind: bool) -> str:
    if other_kind:
        return "not held to the expected rate: the expectation is for the node's fabric ports, of another kind"
    return "no rate was expected (no envelope's nic_rate_gbps): held to this node's own ports only"
