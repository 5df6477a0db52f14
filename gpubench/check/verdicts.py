"""What ``gpubench check`` decides: one :class:`Verdict` per check and target (a GPU, a GPU pair, the node), and a
:class:`NodeVerdict` over them.

States, worst first: FAIL (the node should not take work), WARN (look at it), SKIP (not judged, with the reason;
never counted as a pass), PASS. A node's state is its worst verdict's, except that SKIP alone never makes a node
PASS or FAIL: a node whose every verdict is SKIP is SKIP.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

State = Literal["PASS", "WARN", "FAIL", "SKIP"]
STATES: tuple[State, ...] = ("FAIL", "WARN", "SKIP", "PASS")  # worst first
_RANK = {s: i for i, s in enumerate(STATES)}

# The version of the verdict's JSON (docs/schema.md, gpubench/check/schema.json). History:
# 1: first version.
# 2: h2d and d2h one GPU at a time (h2d_all, d2h_all: every GPU at once, a node total); "simulated", "host_class",
#    each GPU's "binding" and "phases". A version 1 verdict reads the same but for those.
# 3: each verdict's "host_set" (gpubench.results.host_set.set_by_host), null where the host does not set the figure;
#    such a figure is held to its envelope only. A version 2 verdict reads as one with host_set null.
# 4: a figure judged at its envelope's host pace has "value" at that pace, "measured" as measured and "host_pace"
#    (µs). A version 3 verdict reads as one with both null: its value is as measured.
# 5: each verdict's "nodes": the nodes a verdict of the fabric between nodes names. A version 4 verdict reads as one
#    with none.
FORMAT = "gpubench-check"
FORMAT_VERSION = 5
# What every verdict of a check on made-up GPUs (the fake backend) says first, in every format.
SIMULATED = "simulated"
OUT = "gpubench-check"  # where the check's run directories go by default: <OUT>/<cluster>/<run id>
HISTORY = "history"  # --expect history: this node's own earlier checks under <out>/<cluster>


def worst(states) -> State:
    """The worst of ``states``; SKIP only when there is nothing else (an empty list is SKIP)."""
    judged = [s for s in states if s != "SKIP"]
    if not judged:
        return "SKIP"
    return min(judged, key=_RANK.__getitem__)


@dataclass
class Verdict:
    """One check on one target. ``text`` is the one line people read ("2.21 TB/s, 66 % of spec (floor 2.85)");
    the fields beside it are the evidence machines read."""

    check: str  # "hbm", "gemm_bf16", "pcie_link", "ecc", ... (the check set's key)
    target: str  # "gpu3", "gpu0-gpu1", "node"
    state: State
    text: str
    kind: Literal["performance", "fact"] = "performance"
    gpu: int | None = None
    pair: tuple[int, int] | None = None
    title: str = ""  # what is checked, in words ("HBM bandwidth, triad")
    value: float | None = None
    unit: str | None = None
    better: str | None = None  # "higher" | "lower" for a figure
    # The thresholds the value was held against, in the value's unit: below fail_at (above, for a time) FAILs,
    # below warn_at WARNs; typical is what healthy GPUs of this model read.
    fail_at: float | None = None
    warn_at: float | None = None
    typical: float | None = None
    reference: str | None = None  # where the thresholds come from (envelope file and provenance, spec fallback)
    peer_median: float | None = None  # the other GPUs' median figure (the node's, or the fleet's with --fleet)
    peers: int | None = None
    ci: tuple[float, float] | None = None  # 95 % interval of the figure's median, from its samples
    # How sure the state is: the share of resamples of the figure that fall on the state's side of the threshold
    # that decided it (1.0: every resample agrees); None where no threshold decided (facts, SKIP).
    confidence: float | None = None
    retry: float | None = None  # the figure measured again in a fresh process, where it was
    run_dir: str | None = None  # the run directory the figure comes from
    case: str | None = None
    notes: list[str] = field(default_factory=list)
    # A verdict on a made-up GPU (the fake backend): its facts and figures are the simulation's, not hardware's.
    simulated: bool = False
    # Why the host sets the figure (host-timed launches, copies to host memory), where it does: held to its envelope
    # only, never to other GPUs' figures (how they differ is how the processes landed on the host).
    host_set: str | None = None
    # Where the envelope holds the figure at a host pace: ``value`` is the figure moved to that pace, ``measured`` the
    # figure as measured, ``host_pace`` the pace (µs) the host ran at while it was measured (the notes say both).
    measured: float | None = None
    host_pace: float | None = None
    # The nodes a verdict of the fabric between nodes names (a node, its NIC, or both ends of a link), by node name.
    nodes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pair"] = list(self.pair) if self.pair else None
        d["ci"] = list(self.ci) if self.ci else None
        return d


@dataclass
class NodeVerdict:
    host: str
    verdicts: list[Verdict]
    gpus: list[dict[str, Any]] = field(default_factory=list)  # index, name, uuid, pci_bus_id
    run_dirs: list[str] = field(default_factory=list)
    started: str | None = None
    wall_s: float | None = None
    backend: str | None = None
    argv: list[str] = field(default_factory=list)
    strict: bool = False
    host_class: str | None = None  # the class of host the figures the host sets were measured on (its CPU model)
    # What was measured and how long each took: {"what", "gpus", "wall_s", "run_dirs", "why"}; "start" first
    phases: list[dict[str, Any]] = field(default_factory=list)

    @property
    def simulated(self) -> bool:
        """Every verdict is about made-up GPUs (the fake backend): a demonstration of the command, no health check."""
        return self.backend == "fake" or (bool(self.verdicts) and all(v.simulated for v in self.verdicts))

    @property
    def state(self) -> State:
        return worst(v.state for v in self.verdicts)

    def sorted(self) -> list[Verdict]:
        """Worst first; within a state, by GPU then check, node-wide last."""
        return sorted(self.verdicts, key=lambda v: (_RANK[v.state], v.gpu if v.gpu is not None else 1 << 20,
                                                   v.pair or (), v.check))

    def headline(self) -> str:
        """One line: the node's state and its worst findings (at most three)."""
        state = self.state
        mark = f" ({SIMULATED}: the fake backend's made-up GPUs, not hardware)" if self.simulated else ""
        bad = [v for v in self.sorted() if v.state == state and state in ("FAIL", "WARN")]
        if not bad:
            judged = sum(v.state == "PASS" for v in self.verdicts)
            skipped = sum(v.state == "SKIP" for v in self.verdicts)
            tail = f"{judged} checks passed" + (f", {skipped} skipped" if skipped else "")
            return f"node {self.host}: {state}{mark} — {tail}"
        said = f"{SIMULATED}: " if self.simulated else ""  # said once, in the mark
        parts = [f"{target_text(v)} {v.check + ' ' if v.kind == 'performance' else ''}{v.text.removeprefix(said)}"
                 for v in bad[:3]]
        more = f"; and {len(bad) - 3} more" if len(bad) > 3 else ""
        return f"node {self.host}: {state}{mark} — " + "; ".join(parts) + more

    def exit_code(self) -> int:
        """0 PASS/WARN (and SKIP), 1 FAIL; with ``strict``, WARN is 1 as well."""
        state = self.state
        return 1 if state == "FAIL" or (self.strict and state == "WARN") else 0

    def as_dict(self) -> dict[str, Any]:
        counts = {s: sum(v.state == s for v in self.verdicts) for s in STATES}
        return {
            "format": FORMAT, "version": FORMAT_VERSION, "host": self.host, "state": self.state,
            "headline": self.headline(), "counts": counts, "strict": self.strict, "started": self.started,
            "wall_s": self.wall_s, "backend": self.backend, "simulated": self.simulated, "host_class": self.host_class,
            "argv": list(self.argv), "gpus": list(self.gpus), "run_dirs": list(self.run_dirs),
            "phases": list(self.phases),
            "verdicts": [v.as_dict() for v in self.sorted()],
        }


def mark_simulated(verdicts: list[Verdict]) -> None:
    """The fake backend's GPUs (and fabric) are made up: every verdict says so first, in every format; once."""
    for v in verdicts:
        if not v.simulated:
            v.simulated, v.text = True, f"{SIMULATED}: {v.text}"


def target_text(v: Verdict) -> str:
    """Where a verdict applies, in words: ``GPU 3``, ``GPUs 0↔1``, ``node``; a fabric verdict's own target
    (``node03``, ``node01-node04``, ``node03:rail1``)."""
    if v.nodes:
        return v.target
    if v.pair:
        return f"GPUs {v.pair[0]}↔{v.pair[1]}"
    if v.gpu is not None:
        return f"GPU {v.gpu}"
    return "node"


__all__ = ["mark_simulated", "State", "STATES", "Verdict", "NodeVerdict", "worst", "target_text", "FORMAT", "FORMAT_VERSION", "SIMULATED",
           "OUT", "HISTORY"]
