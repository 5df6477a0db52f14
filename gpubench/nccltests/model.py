"""What a parsed nccl-tests / rccl-tests log holds: runs, their devices and their result rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpubench.errors import UsageError

TOOLS = ("nccl-tests", "rccl-tests")
PLACEMENTS = ("out", "in")


class ParseError(UsageError):
    """A log gpubench cannot read. It names the file, the line and the text, so the user can look."""

    def __init__(self, source: str, line: int | str | None, reason: str, text: str | None = None):
        self.source, self.line, self.reason, self.text = source, line, reason, text
        where = f"{source}:{line}" if line is not None else source
        shown = f": {text.strip()[:200]!r}" if text is not None else ""
        super().__init__(f"{where}: {reason}{shown}")


@dataclass(frozen=True)
class Device:
    """One ``#  Rank N ... on HOST device D [BUS] NAME`` line (one per rank)."""

    rank: int
    host: str
    device: int
    name: str
    pid: int | None = None
    group: int | None = None  # NCCL_TESTS_SPLIT colour (2.13.4+ prints it; older logs do not)
    bus: str | None = None


@dataclass
class Row:
    """One placement (out-of-place or in-place) of one printed result line."""

    line: int  # 1-based line of the log (JSON: 1-based index in "results")
    size: int  # bytes, as printed (nccl-tests: the larger of the send and receive buffers)
    count: int  # elements, as printed
    type: str  # nccl-tests' type name, e.g. float, bfloat16
    redop: str | None  # sum, prod, ..., none; None where the header has no redop column (before 2.13)
    root: int | None  # -1 for non-rooted collectives; None where the header has no root column
    placement: str  # "out" | "in"
    time_us: float
    algbw: float  # GB/s
    busbw: float  # GB/s
    wrong: int | None  # wrong elements summed over ranks; None when not validated (N/A) or before 2.13
    error: float | None = None  # before 2.13: the max absolute deviation the `error` column printed
    flagged: bool = False  # rccl-tests marked the error with '*' (above its threshold)
    # Half a unit in the last printed digit of each figure: how far the true value may lie from the printed one.
    time_tol: float = 0.0
    algbw_tol: float = 0.0
    busbw_tol: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)  # per-iteration stats (-I), timestamp (-S), algo (-M)


@dataclass
class Run:
    """One run of one binary: from its ``# nThread`` line (or version / ``Collective test starting`` line) to
    its footer. A log holding several runs gives several Run objects."""

    source: str  # the file it came from
    line: int  # the line where the run starts
    tool: str = "nccl-tests"  # "nccl-tests" | "rccl-tests"
    tool_detected: bool = False  # tool was read from the log's content (not assumed)
    version: str | None = None  # the tool's version when printed (nccl-tests 2.17.4+, rccl-tests' git ref)
    collective: str | None = None  # all_reduce, all_gather, ...; None only for a run without rows
    collective_source: str | None = None  # "log", "user", "hint" (a command line echoed in the log), "table"
    world_size: int | None = None
    nnodes: int | None = None
    devices: list[Device] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    avg_busbw: float | None = None  # the "# Avg bus bandwidth" footer (mean busbw over all printed rows)
    out_of_bounds: int | None = None  # the "# Out of bounds values : N OK|FAILED" footer
    out_of_bounds_ok: bool | None = None
    nccl_version: str | None = None  # NCCL (or RCCL) library version when the log says it
    generation: str | None = None  # "pre-2.13" (error column), "2.13+" (#wrong column), "json-vN"
    columns: tuple[str, ...] = ()  # the table's column names (text logs), for the collective inference
    errors: list[str] = field(default_factory=list)  # "# error: ..." lines

    @property
    def hostnames(self) -> list[str]:
        return sorted({d.host for d in self.devices})

    def summary(self) -> dict[str, Any]:
        """What run.json keeps of this run (no rows: those are in the table)."""
        return {
            "source": self.source,
            "line": self.line,
            "tool": self.tool,
            "version": self.version,
            "generation": self.generation,
            "collective": self.collective,
            "collective_source": self.collective_source,
            "world_size": self.world_size,
            "nnodes": self.nnodes,
            "hostnames": self.hostnames,
            "devices": sorted({d.name for d in self.devices}),
            "nccl_version": self.nccl_version,
            "config": self.config,
            "rows": len(self.rows),
            "avg_busbw": self.avg_busbw,
            "out_of_bounds": self.out_of_bounds,
            "out_of_bounds_ok": self.out_of_bounds_ok,
            "errors": self.errors,
        }
