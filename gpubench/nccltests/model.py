"""What a parsed nccl-tests / rccl-tests log holds: runs, their devices and their result rows."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gpubench.errors import UsageError

TOOLS = ("nccl-tests", "rccl-tests")
PLACEMENTS = ("out", "in")

# nccl-tests' type names (its -d option and its `type` column) → the names gpubench writes.
NCCL_TYPES = {
    "float": "float32",
    "half": "float16",
    "bfloat16": "bfloat16",
    "double": "float64",
    "int8": "int8",
    "uint8": "uint8",
    "int32": "int32",
    "uint32": "uint32",
    "int64": "int64",
    "uint64": "uint64",
    "f8e4m3": "float8_e4m3",
    "f8e5m2": "float8_e5m2",
}


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
    # wrong elements summed over ranks; None when not validated (N/A) or before 2.13; a float where nccl-tests printed
    # it with %g's exponent (1.04858e+06: six digits, not an exact count)
    wrong: int | float | None
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
    avg_busbw_tol: float = 0.0  # half a unit in the footer's last printed digit (``%g``: six significant digits)
    out_of_bounds: int | None = None  # the "# Out of bounds values : N OK|FAILED" footer
    out_of_bounds_ok: bool | None = None
    nccl_version: str | None = None  # NCCL (or RCCL) library version when the log says it
    generation: str | None = None  # "pre-2.13" (error column), "2.13+" (#wrong column), "json-vN"
    columns: tuple[str, ...] = ()  # the table's column names (text logs), for the collective inference
    errors: list[str] = field(default_factory=list)  # "# error: ..." lines
    failure: str | None = None  # "Test NCCL failure common.cu:392 'unhandled system error'": the run died there
    warnings: list[str] = field(default_factory=list)  # the last NCCL/RCCL WARN lines before it (the reason, often)

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
            "failure": self.failure,
            "nccl_warnings": self.warnings,
        }


# --- names: names nccl-tests prints (binaries, data types, reduction ops) and which collective a table can belong to.
# Logs since 2.16.7 and -J files name the binary; an older table is narrowed down by its header's redop and root
# columns (per tag: docs/nccl-tests.md) and its ``size``: count × itemsize, × ranks for all_gather, reduce_scatter,
# alltoall, gather, scatter and hypercube (``*GetCollByteCount``). The user settles the rest with ``--collective``.


# Binaries nccl-tests and rccl-tests build (src/Makefile), without the `_perf` suffix.
BINARIES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "alltoallv", "broadcast", "reduce",
            "sendrecv", "gather", "scatter", "hypercube", "all_reduce_bias")

# Type names beyond NCCL_TYPES: NCCL 1 builds printed char/int; rccl-tests prints fp8_e4m3/fp8_e5m2
# (and uses AMD's FNUZ fp8 on gfx942, where it prints "using FNUZ FP8 types").
TYPE_ALIASES = {"char": "int8", "int": "int32", "fp8_e4m3": "float8_e4m3", "fp8_e5m2": "float8_e5m2"}
FNUZ = {"float8_e4m3": "float8_e4m3fnuz", "float8_e5m2": "float8_e5m2fnuz"}
ITEMSIZE = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "float16": 2,
            "float32": 4, "float64": 8, "bfloat16": 2, "float8_e4m3": 1, "float8_e5m2": 1}
REDOPS = ("sum", "prod", "max", "min", "avg", "mulsum", "none")

_BINARY = re.compile(r"^(?:.*/)?([a-z][a-z0-9_]*?)_perf(?:_[A-Za-z0-9]+)*$")


def collective_of_binary(name: str) -> str | None:
    """``all_reduce_perf`` / ``./build/all_reduce_perf_mpi`` → ``all_reduce``; None for anything else."""
    m = _BINARY.match(name.strip())
    return m.group(1) if m and m.group(1) in BINARIES else None


def nccl_version(code: int) -> str:
    """NCCL_VERSION_CODE → "2.28.9" (codes below 10000 are NCCL before 2.9: major*1000 + minor*100 + patch)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def dtype_of(type_name: str, *, fnuz: bool = False) -> str | None:
    """nccl-tests' type name → gpubench's dtype (NCCL_TYPES, plus older/rccl spellings)."""
    dtype = NCCL_TYPES.get(type_name) or TYPE_ALIASES.get(type_name)
    if dtype and fnuz:
        dtype = FNUZ.get(dtype, dtype)
    return dtype


def itemsize(type_name: str) -> int | None:
    dtype = dtype_of(type_name)
    return ITEMSIZE.get(dtype) if dtype else None


def _ratio(rows, world_size: int | None) -> str | None:
    """"one" when size = count × itemsize on every row, "ranks" when size = count × itemsize × ranks, else
    None (no rows with elements, a single rank, or no consistent relation)."""
    kinds = set()
    for r in rows:
        size = itemsize(r.type)
        if not size or r.count <= 0:
            continue
        k = r.size / (r.count * size)
        kinds.add("one" if k == 1 else "ranks" if world_size and k == world_size else "other")
    if world_size == 1 or len(kinds) != 1:
        return None
    kind = kinds.pop()
    return None if kind == "other" else kind


def candidates(columns: tuple[str, ...], rows, world_size: int | None, generation: str | None) -> set[str] | None:
    """The collectives whose output this table could be; None when rows are needed and there are none."""
    if not rows:
        return None
    if generation == "pre-2.13":
        reducing, rooted = "redop" in columns, "root" in columns
    else:
        reducing = any(r.redop not in (None, "none") for r in rows)
        rooted = any(r.root not in (None, -1) for r in rows)
    by_ratio = {
        (True, True): ({"reduce"}, {"reduce"}),
        # Before 2.13 alltoall printed a redop column too; from 2.13 sendrecv prints its -o reduction (sum by default).
        (True, False): ({"all_reduce"} if generation == "pre-2.13" else _all_reduce_or_sendrecv(rows, world_size),
                        {"reduce_scatter", "alltoall"} if generation == "pre-2.13" else {"reduce_scatter"}),
        (False, True): ({"broadcast"}, {"gather", "scatter"}),
        # alltoallv (2.13+ only) prints its busiest rank's bytes as size: any ratio to its per-peer count.
        (False, False): ({"sendrecv"}, {"all_gather", "hypercube"} if generation == "pre-2.13"
                         else {"all_gather", "alltoall", "alltoallv", "hypercube"}),
    }[(reducing, rooted)]
    kind = _ratio(rows, world_size)
    if kind == "one":
        return set(by_ratio[0])
    if kind == "ranks":
        return set(by_ratio[1])
    return by_ratio[0] | by_ratio[1]


def _all_reduce_or_sendrecv(rows, world_size: int | None) -> set[str]:
    """A 2.13+ table with a reduction, root -1 and size = count × itemsize: all_reduce, or sendrecv, which prints
    the reduction it was given (sum by default; src/sendrecv.cu passes -o through). sendrecv never checks its
    in-place result (``reportErrors = in_place ? 0 : 1``: #wrong is N/A there) and its busbw is algbw on any number
    of ranks, where all_reduce's is 2 (n - 1) / n × algbw: equal only on two ranks."""
    inplace = [r for r in rows if r.placement == "in"]
    if any(r.wrong is not None for r in inplace):
        return {"all_reduce"}
    if inplace and any(r.wrong is not None for r in rows if r.placement == "out"):
        return {"sendrecv"}
    unit = _busbw_is_algbw(rows)
    if unit is False:
        return {"all_reduce"}
    if unit and world_size and world_size != 2:
        return {"sendrecv"}
    return {"all_reduce", "sendrecv"}


def _busbw_is_algbw(rows) -> bool | None:
    """Whether every row prints busbw = algbw within their rounding (None: no row with a bandwidth to tell)."""
    usable = [r for r in rows if all(math.isfinite(v) for v in (r.algbw, r.busbw, r.algbw_tol, r.busbw_tol))
              and r.algbw > 10 * r.algbw_tol]
    if not usable:
        return None
    return all(abs(r.busbw - r.algbw) <= (r.busbw_tol + r.algbw_tol) * (1 + 1e-9) for r in usable)


# A collective named as an option's value on a command line: a wrapper's `-t all_gather` (GCP's
# run_nccl_tests.sh), `--collective=alltoall`. nccl-tests' own -t takes a number, so this is never its own flag.
_OPTION_VALUE = re.compile(r"(?:^|\s)--?[A-Za-z][\w-]*(?:=|\s+)['\"]?([a-z][a-z_]*)(?=['\"]?(?:\s|$|[,;]))")


def hinted(text: str) -> set[str]:
    """Collectives a command line echoed in the log names for the run it precedes: ``<name>_perf`` words (the
    binary: ``./build/all_gather_perf``, ``Running: /opt/nccl-tests/build/alltoall_perf``, ``sendrecv_perf_mpi``),
    and a collective's name given as an option's value (``run_nccl_tests.sh -t all_gather``)."""
    found = set()
    for word in re.findall(r"[A-Za-z0-9_./-]*_perf[A-Za-z0-9_]*", text):
        name = collective_of_binary(word)
        if name:
            found.add(name)
    found.update(m for m in _OPTION_VALUE.findall(text) if m in BINARIES)
    return found


# --- printed numbers: numbers as nccl-tests prints them (``%6.2f``-style; since 2.17.3 the first of ``%.2f``, ``%.1f``,
# ``%.0f`` and ``%.1e`` that fits), each with half a unit in its last digit, the rounding the busbw check allows.


STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")  # -S 1's timestamp column, two fields
_NUMBER = re.compile(r"^[-+]?(?:(\d+)(?:\.(\d*))?|\.(\d+))(?:[eE]([-+]?\d+))?$")
_SPECIAL = {"nan": math.nan, "-nan": math.nan, "+nan": math.nan, "inf": math.inf, "+inf": math.inf,
            "-inf": -math.inf}


def figure(token: str) -> tuple[float, float] | None:
    """``"12439.2"`` → (12439.2, 0.05); ``"1.2e+04"`` → (12000.0, 500.0); ``"nan"`` → (nan, nan); None if the
    token is not a number C's printf could have written."""
    special = _SPECIAL.get(token.lower())
    if special is not None:
        return special, math.nan
    m = _NUMBER.match(token)
    if not m:
        return None
    decimals = len(m.group(2) or m.group(3) or "")
    exponent = int(m.group(4) or 0)
    return float(token), 0.5 * 10.0 ** (exponent - decimals)


def count(token: str) -> int | float | None:
    """A ``%6g``-printed element count: ``0``, ``12`` → int; ``1.04858e+06`` → the float it is (six digits of a
    count, never the exact integer it was not); None if not a count."""
    f = figure(token)
    if f is None or not math.isfinite(f[0]) or f[0] < 0:
        return None
    return f[0] if re.search(r"[eE]", token) else int(round(f[0]))


def integer(token: str) -> int | None:
    return int(token) if re.fullmatch(r"[-+]?\d+", token) else None


# --- finalize: what both parsers settle once a run is read: its world size, node count and collective.


def world(run: Run) -> None:
    """World size = the ranks listed in the device lines; nodes = their distinct host names.

    With NCCL_TESTS_SPLIT the ranks form groups that each run their own communicator (the ``Group`` field):
    the bandwidths are per group, so the world size is the size of rank 0's group.
    """
    if not run.devices:
        return
    ranks = Counter(d.rank for d in run.devices)
    if set(ranks) != set(range(len(ranks))) and not any(d.group for d in run.devices):
        # A paste that starts inside the device list (``#  Rank 71 ...``): the lines kept are not the world, only
        # its lower bound; infer_world settles it from the table.
        run.config["ranks_seen"] = f"{min(ranks)}-{max(ranks)}"
        run.config["world_at_least"] = max(ranks) + 1
        return
    twice = sorted(r for r, n in ranks.items() if n > 1)
    if twice:
        raise ParseError(
            run.source, run.line,
            f"rank {twice[0]} is listed {ranks[twice[0]]} times in the device lines: several processes each ran "
            "their own job (a binary built without MPI=1 launched by mpirun or srun?); rebuild nccl-tests with "
            "`make MPI=1` and run again")
    first = min(run.devices, key=lambda d: d.rank)
    mine = [d for d in run.devices if d.group == first.group]
    run.world_size = len(mine)
    run.nnodes = len({d.host for d in mine})


# The collectives whose busbw is algbw × (n − 1) / n (each test's GetBw).
_PER_RANK_FACTOR = ("all_gather", "reduce_scatter", "alltoall", "alltoallv", "gather", "scatter")


def _ranks_between(family: str, lo: float, hi: float) -> tuple[float, float]:
    """The world sizes whose busbw factor lies in [lo, hi] for a family of collectives."""
    def n(r: float) -> float:
        if family == "all_reduce":  # 2 (n - 1) / n
            return math.inf if r >= 2 else 2 / (2 - r)
        return math.inf if r >= 1 else 1 / (1 - r)  # (n - 1) / n

    return n(lo), n(hi)


def _family(coll: str | None, mid: float) -> str | None:
    """Which busbw factor the rows of collective ``coll`` (None: not known yet) follow: "all_reduce" (2 (n − 1) /
    n), "n-1/n" (all_gather, reduce_scatter, alltoall, alltoallv, gather, scatter), or None where it does not
    depend on n (sendrecv, broadcast, reduce, hypercube)."""
    if coll in _PER_RANK_FACTOR:
        return "n-1/n"
    if coll is not None and coll != "all_reduce":
        return None
    return "all_reduce" if (coll == "all_reduce" or mid >= 1) else "n-1/n"


def _ranks_fitting(run: Run, assumed: str | None = None) -> tuple[str | None, float, float, float, int]:
    """(family, lowest n, highest n, the median busbw / algbw, rows used): the world sizes every row's printed
    busbw / algbw allows, within its printed digits, for the run's collective (else ``assumed``)."""
    usable = [r for r in run.rows if r.algbw > 1 and r.busbw > 0 and math.isfinite(r.busbw)]
    if not usable:
        return None, 0.0, math.inf, math.nan, 0
    mid = sorted(r.busbw / r.algbw for r in usable)[len(usable) // 2]
    family = _family(run.collective or assumed, mid)
    lo, hi = 1.0, math.inf
    if family is not None:
        for r in usable:
            a, b = _ranks_between(family, (r.busbw - r.busbw_tol) / (r.algbw + r.algbw_tol),
                                  (r.busbw + r.busbw_tol) / max(r.algbw - r.algbw_tol, 1e-9))
            lo, hi = max(lo, a), min(hi, b)
    return family, lo, hi, mid, len(usable)


def contradicts(run: Run) -> bool:
    """Whether the device lines' world size is one the table's busbw / algbw rules out: the paste kept only the
    first of its device lines (NVIDIA/nccl-tests#322 printed ranks 0-99 of 1024). The lines are then a lower bound."""
    # Only all_reduce, named by the log, a command line or the user: its factor has always been 2 (n - 1) / n
    # (all_gather's and reduce_scatter's were not before 2020), and every row must agree on one other world size (a
    # single row off is the row's error, which the import reports as such).
    if not run.rows or not run.world_size or run.world_size < 2 or run.collective != "all_reduce" \
            or run.collective_source == "table":
        return False
    family, lo, hi, _, used = _ranks_fitting(run)
    if family is None or not used or lo > hi or lo - 1e-9 <= run.world_size <= hi + 1e-9:
        return False
    run.config["ranks_seen"] = f"0-{run.world_size - 1}"
    run.config["world_at_least"] = run.world_size
    run.world_size = None
    return True


def infer_world(run: Run, ranks: int | None = None, assumed: str | None = None) -> None:
    """The world size of a run whose device lines do not give it (a fragment of a paste), and from what:
    ``--ranks`` when given; else the busbw / algbw ratio its rows print, which is the collective's busbw factor
    (2 (n − 1) / n for all_reduce, (n − 1) / n for all_gather, reduce_scatter, alltoall(v), gather and scatter),
    solved for n within the printed digits of every row; the highest rank a device line shows is a lower bound.
    ``assumed`` is the collective the user or a command line named, when the log does not. The evidence goes into
    ``run.config["world_size_from"]``."""
    least = int(run.config.get("world_at_least") or 1)
    if len(run.devices) != (ranks or 0):  # the device lines are not the world: their hosts are not its nodes
        run.nnodes = None
    if ranks:
        if ranks < least:
            raise ParseError(run.source, run.line, f"--ranks {ranks}, but the log shows rank {least - 1}")
        run.world_size, run.config["world_size_from"] = ranks, "--ranks"
        return
    family, lo, hi, mid, used = _ranks_fitting(run, assumed)
    if not used:
        raise ParseError(run.source, run.line, _no_world(least, "no row with a bandwidth to read it from"))
    if family is None:
        raise ParseError(run.source, run.line,
                         _no_world(least, f"{run.collective or assumed}'s busbw does not depend on it"))
    lo = max(lo, least)
    fits = list(range(max(2, math.ceil(lo - 1e-9)), math.floor(hi + 1e-9) + 1)) if hi < math.inf else []
    if len(fits) != 1:
        why = "busbw / algbw fits no whole number of ranks" if not fits and hi < math.inf else \
            f"busbw / algbw = {mid:.4f} fits {len(fits) or 'many'} world sizes"
        raise ParseError(run.source, run.line, _no_world(least, why))
    run.world_size = fits[0]
    formula = "2 (n - 1) / n" if family == "all_reduce" else "(n - 1) / n"
    run.config["world_size_from"] = (f"busbw / algbw = {mid:.4f} = {formula} on {used} rows"
                                     + (f"; ranks up to {least - 1} listed" if least > 1 else ""))


def _no_world(least: int, why: str) -> str:
    seen = f": the log lists ranks up to {least - 1}," if least > 1 else ","
    return (f"no device lines for the whole world (a fragment of a log?){seen} and the table cannot settle the "
            f"world size ({why}): give --ranks N")


def named(run: Run, user: str | None, hints: set[str]) -> str | None:
    """The collective the log, the user or a command line names for the run (one name), before the table is
    weighed: what the world size is solved for where no device line gives it."""
    return run.collective or user or (next(iter(hints)) if len(hints) == 1 else None)


def collective(run: Run, user: str | None, hints: set[str]) -> None:
    """Settle ``run.collective``: the log's own word, else ``--collective``, else a command line echoed
    before the run, else the only collective the table's shape allows. A run with rows it cannot settle
    is an error that asks for ``--collective``."""
    fits = candidates(run.columns, run.rows, run.world_size, run.generation)
    if run.collective is not None:
        if user and user != run.collective:
            raise ParseError(run.source, run.line,
                             f"the log says this run is {run.collective} but --collective says {user}")
        run.collective_source = "log"
        return
    if user:
        if fits is not None and user not in fits:
            raise ParseError(run.source, run.line,
                             f"--collective {user} does not fit this table (it fits {_either(fits)})")
        run.collective, run.collective_source = user, "user"
        return
    if fits is None:
        return  # no rows: nothing to label
    usable = {h for h in hints if h in fits}
    if len(usable) == 1:
        run.collective, run.collective_source = usable.pop(), "hint"
        return
    if len(fits) == 1:
        run.collective, run.collective_source = next(iter(fits)), "table"
        return
    raise ParseError(run.source, run.line,
                     f"the log does not say which collective this run measured and its table fits "
                     f"{_either(fits)}: pass --collective NAME")


def _either(options: set[str]) -> str:
    items = sorted(options)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]
