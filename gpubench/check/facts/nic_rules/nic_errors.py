"""``nic_errors``: error counters of an RDMA port that grew between the reading before the test and the one after.
A link that went down during the test FAILs; physical-layer errors, link retrains, receive errors and transport
retries WARN. Values since the last reset are said in the text, never judged alone: a counter that grew last month
on a link since repaired says nothing about today (Meta's gcm check_ib_counters judges them, and flags forever).
Sources: kernel sysfs-class-infiniband; NCCL's troubleshooting guide (rdma statistic, perfquery); gcm; Azure's
health-check guidance (fabric.md 1.5, 1.6, 3)."""

from __future__ import annotations

from gpubench.check.facts.nic_fields import NicSnapshot, Port
from gpubench.check.facts.nic_rules.common import verdict
from gpubench.check.verdicts import Verdict

CHECK, TITLE = "nic_errors", "RDMA port errors"
# The link went down and came back while we measured: every transfer on it stalled. gcm is CRITICAL on any.
FAIL_ON_GROWTH = ("link_downed",)
# Any growth in minutes WARNs: a healthy link (FEC on) shows none of these while it carries a test; gcm and Azure's
# guidance flag any symbol error or link error recovery. The transport counters (mlx5 packet_seq_err,
# implied_nak_seq_err, local_ack_timeout_err; EFA's SRD timeouts and impaired or unresponsive peers) count loss
# the transport had to repair: on a lossless fabric that is a link or a peer going bad (NCCL troubleshooting).
WARN_ON_GROWTH = ("symbol_error", "link_error_recovery", "port_rcv_errors", "port_rcv_remote_physical_errors",
                  "local_link_integrity_errors", "excessive_buffer_overrun_errors", "packet_seq_err",
                  "implied_nak_seq_err", "local_ack_timeout_err", "retrans_timeout_events",
                  "unresponsive_remote_events", "impaired_remote_conn_events")
# Said, not judged: they grow on healthy fabrics under load (congestion discards and credit waits, out-of-order
# arrival under adaptive routing, receiver-not-ready retries of a slow consumer, SRD's routine retransmits).
REPORTED = ("port_xmit_discards", "port_xmit_wait", "out_of_sequence", "rnr_nak_retry_err", "duplicate_request",
            "retrans_pkts", "rx_drops")
# IB PMA counters saturate at their width's ceiling instead of wrapping (sysfs.c PORT_PMA_ATTR widths): at the
# ceiling, growth cannot be seen, until someone clears them (perfquery -R).
CEILING = {"symbol_error": 0xFFFF, "port_rcv_errors": 0xFFFF, "port_rcv_remote_physical_errors": 0xFFFF,
           "port_xmit_discards": 0xFFFF, "link_error_recovery": 0xFF, "link_downed": 0xFF,
           "local_link_integrity_errors": 0xF, "excessive_buffer_overrun_errors": 0xF}


def judge(before: NicSnapshot, after: NicSnapshot | None = None,
          expected_rate_gbps: float | None = None) -> list[Verdict]:
    return [_one(p, after.port(p.target) if after else None, after is not None) for p in before.ports]


def counters(p: Port) -> dict[str, int | None]:
    """The port's error and retry counters, PMA and driver ones together (their names do not overlap)."""
    both = {**p.hw_counters, **p.counters}
    return {k: both[k] for k in (*FAIL_ON_GROWTH, *WARN_ON_GROWTH, *REPORTED) if k in both}


def _one(p: Port, later: Port | None, read_after: bool) -> Verdict:
    now = counters(p)
    judged = [k for k in (*FAIL_ON_GROWTH, *WARN_ON_GROWTH) if k in now]
    if not judged:
        why = next((p.why[k] for k in p.why if k in (*FAIL_ON_GROWTH, *WARN_ON_GROWTH)), "none present")
        return verdict(CHECK, p.target, "SKIP", f"no error counter readable ({why})", TITLE)
    since = _since_reset(now)
    if later is None:
        text = ("gone after the test: growth not judged" if read_after
                else "read once, not after the test: growth not judged")
        return verdict(CHECK, p.target, "SKIP", f"{text}; {since}", TITLE)
    grew, unseen = _growth(now, counters(later), judged)
    notes = [f"{k} {why}" for k, why in unseen.items()]
    tail = f"; {since}" if any(now.values()) else ""  # what it was before the test, said beside what grew
    fail = [k for k in FAIL_ON_GROWTH if grew.get(k)]
    warn = [k for k in WARN_ON_GROWTH if grew.get(k)]
    said = ", ".join(f"{k} +{grew[k]}" for k in (*fail, *warn))
    if fail:
        return verdict(CHECK, p.target, "FAIL", f"link went down during the test: {said}{tail}", TITLE, notes)
    if warn:
        return verdict(CHECK, p.target, "WARN", f"errors grew during the test: {said}{tail}", TITLE, notes)
    if unseen:
        return verdict(CHECK, p.target, "SKIP", f"growth not seen for {', '.join(unseen)}{tail}", TITLE, notes)
    extra = ", ".join(f"{k} +{grew[k]}" for k in REPORTED if grew.get(k))
    text = f"no error grew during the test ({len(judged)} counters)" + (f"; {extra} (not judged)" if extra else "")
    text += tail
    return verdict(CHECK, p.target, "PASS", text, TITLE, notes)


def _growth(now: dict[str, int | None], later: dict[str, int | None],
            judged: list[str]) -> tuple[dict[str, int], dict[str, str]]:
    """Each counter's growth, and why a judged one's growth cannot be known (unreadable, went back, saturated)."""
    grew: dict[str, int] = {}
    unseen: dict[str, str] = {}
    for k, a in now.items():
        b = later.get(k)
        if a is None or b is None:
            unseen[k] = "not readable"
        elif b < a:
            unseen[k] = f"went back ({a} -> {b}): cleared during the test"
        elif b == a and b >= CEILING.get(k, 1 << 64):
            unseen[k] = f"at its ceiling {b}: clear it (perfquery -R) to see growth"
        else:
            grew[k] = b - a
    return grew, {k: v for k, v in unseen.items() if k in judged}


def _since_reset(now: dict[str, int | None]) -> str:
    nonzero = [f"{k} {v}" for k, v in now.items() if v]
    return "since the counters were cleared: " + (", ".join(nonzero) if nonzero else "no error")
