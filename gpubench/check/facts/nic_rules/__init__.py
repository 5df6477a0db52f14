"""The NIC facts of a node, judged: one rule per fact, each a module here (``nic_port``, ``nic_rate``,
``nic_errors``, ``net_carrier``) with ``judge(before, after, expected_rate_gbps) -> list[Verdict]``. They are per
node, not per GPU, so they live apart from :mod:`gpubench.check.facts.rules` (whose facts are a GPU's); their
reader is :mod:`gpubench.check.facts.readers.rdma`. SKIP is never a pass, and missing data never PASSes.

Counters are judged by their growth between a reading before the test and one after (``after``); with no reading
after, the counter facts SKIP and say their values since the last reset."""

from __future__ import annotations

from gpubench.check.facts.nic_fields import NicSnapshot
from gpubench.check.facts.nic_rules import net_carrier, nic_errors, nic_port, nic_rate
from gpubench.check.facts.nic_rules.common import verdict
from gpubench.check.verdicts import SIMULATED, Verdict

RULES = (nic_port, nic_rate, nic_errors)  # per RDMA port
CHECKS = tuple(m.CHECK for m in (*RULES, net_carrier))
TITLES = {m.CHECK: m.TITLE for m in (*RULES, net_carrier)}


def judge(before: NicSnapshot, after: NicSnapshot | None = None, expected_rate_gbps: float | None = None,
          simulated: bool = False) -> list[Verdict]:
    """Every NIC verdict of the node: per RDMA port its state, rate and errors (one SKIP with the reason where the
    node has no RDMA port), then per network interface its flaps. ``expected_rate_gbps``: an envelope's
    ``nic_rate_gbps``, or None. ``simulated``: a fake tree (the fake backend): every verdict says so first."""
    if before.ports:
        out = [v for m in RULES for v in m.judge(before, after, expected_rate_gbps)]
    else:
        out = [verdict(nic_port.CHECK, "node", "SKIP", before.why or "no RDMA port", nic_port.TITLE)]
    out += net_carrier.judge(before, after, expected_rate_gbps)
    if simulated:
        for v in out:
            v.simulated, v.text = True, f"{SIMULATED}: {v.text}"
    return out


__all__ = ["judge", "CHECKS", "TITLES", "RULES"]
