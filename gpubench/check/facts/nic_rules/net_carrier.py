"""``net_carrier``: a network interface whose carrier changed while the test ran FAILs: the link flapped (Azure's
health checks count "lost carrier" events, OCI's "Link down" lines; carrier_changes is the kernel's count of both,
Documentation/ABI/testing/sysfs-class-net). Changes since boot are said, never judged alone: a cable reseated last
month counts there forever. An interface that is down stays unjudged on that alone: a spare port has no cable."""

from __future__ import annotations

from gpubench.check.facts.nic_fields import NetIf, NicSnapshot
from gpubench.check.facts.nic_rules.common import unknown, verdict
from gpubench.check.verdicts import Verdict

CHECK, TITLE = "net_carrier", "Link flaps"


def judge(before: NicSnapshot, after: NicSnapshot | None = None,
          expected_rate_gbps: float | None = None) -> list[Verdict]:
    return [_one(n, after.net(n.name) if after else None, after is not None) for n in before.nets]


def _one(n: NetIf, later: NetIf | None, read_after: bool) -> Verdict:
    a = n.carrier_changes
    if a is None:
        return verdict(CHECK, n.name, "SKIP", f"carrier changes not readable ({unknown(n.why, 'carrier_changes')})",
                       TITLE)
    state = f"operstate {n.operstate or 'unknown'}"
    if later is None:
        text = "gone after the test" if read_after else "read once, not after the test"
        return verdict(CHECK, n.name, "SKIP", f"{text}: flaps not judged ({a} carrier changes since boot, {state})",
                       TITLE)
    b = later.carrier_changes
    if b is None:
        why = unknown(later.why, "carrier_changes")
        return verdict(CHECK, n.name, "SKIP", f"carrier changes not readable after the test ({why})", TITLE)
    if b < a:
        return verdict(CHECK, n.name, "SKIP", f"carrier changes went back ({a} -> {b}): the interface was "
                       "re-created during the test", TITLE)
    if b > a:
        return verdict(CHECK, n.name, "FAIL", f"carrier changed {b - a} time{'s' if b - a != 1 else ''} during the "
                       f"test: a flapping link ({state} -> {later.operstate or 'unknown'})", TITLE)
    return verdict(CHECK, n.name, "PASS", f"no carrier change during the test ({state}; {b} since boot)", TITLE)
