"""The text output of nccl-tests and rccl-tests, every generation, into :class:`Run` objects.

A log is read line by line after its launcher prefix (:func:`strip_prefix`) is removed. Lines the tool prints start
or fill a run; result rows are read against the column names of the header above them; anything else (MPI
warnings, NCCL INFO lines, blank lines) is skipped. A line that looks like a result row and does not read as
one is an error naming the line, never a row silently lost.

Where each format comes from (docs/nccl-tests.md has the table): ``src/common.cu`` / ``src/util.cu`` and the
per-collective ``src/*.cu`` of NVIDIA/nccl-tests at each tag, and ``src/common.cu`` / ``src/common.cpp`` of
ROCm/rccl-tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpubench.nccltests import headerless, model
from gpubench.nccltests.model import Device, ParseError, Row, Run
from gpubench.nccltests.prefix import Prefixes

# nccl-tests 2.17.4+; rccl-tests synced with it (ROCm/rocm-systems, 2026) prints "rccl-tests version ... rccl-...".
_VERSION = re.compile(r"^#\s*([nr]ccl-tests) version\s+(\S+)(?:\s+\(([^)]*)\))?"
                      r"(?:.*?[nr]ccl-headers=(\d+))?(?:.*?[nr]ccl-library=(\d+))?")
_START = re.compile(r"#\s*Collective test starting:\s*(\S+)")
_CONFIG = re.compile(r"#\s*nThreads?:?\s+\d+\s+nGpus")
_RCCL_TESTS = re.compile(r"^rccl-tests: Version\s+(\S+)")
_BANNER = re.compile(r"\b(RCCL|HIP|ROCm) version\s*:\s*(\S+)")
_RCCL_LINES = re.compile(r"^(Hostname|Librccl path)\s*:")
_NCCL_VERSION = re.compile(r"(?:^|NCCL INFO )NCCL version (\S+)")  # NCCL_DEBUG=VERSION / INFO
_DEVICE = re.compile(r"^#\s+Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+"
                     r"\[([^\]]*)\]\s*(.*?)\s*$")
_DEVICE_LIKE = re.compile(r"^#\s+Rank\s+\d+")
_NAMES = re.compile(r"^#\s+(size|bytes)\s+(count|N)\s")
_UNITS = re.compile(r"^#\s+\(B\)")
_PLACES = re.compile(r"\b(out-of-place|in-place)\b")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)(?:\s+(OK|FAILED))?")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
_TYPES = "|".join(sorted(set(model.ITEMSIZE) | set(model.TYPE_ALIASES) | {
    "float", "half", "double", "bfloat16", "f8e4m3", "f8e5m2"}, key=len, reverse=True))
# A result row: size, count, a type name. Outside a table only a known type name counts, so that foreign text
# starting with two numbers is not mistaken for data; inside one anything in third place is read (and an
# unknown type is an error).
_ROW_STRICT = re.compile(rf"^\s*\d+\s+\d+\s+(?:{_TYPES})\s")
_ROW_LOOSE = re.compile(r"^\s*\d+\s+\d+\s+\S+\s+\S+")
_ROW_INSIDE = re.compile(rf"\s\d+\s+\d+\s+(?:{_TYPES})\s+\S+\s+\S+\s+\S+\s+\S+")
_GLUED = re.compile(r"^(\d+(?:\.\d*)?(?:e[-+]?\d+)?\*?|N/A)([A-Za-z_].*)$")
# How a run that dies says so (nccl-tests' NCCLCHECK/CUDACHECK; rccl-tests' HIP), and NCCL's warnings before it.
_FAILURE = re.compile(r"\bTest (?:NCCL|CUDA|HIP|RCCL) failure\b.*$")
_WARN = re.compile(r"\b[NR]CCL WARN\b\s*(.*)$")

_CONFIG_FIELDS = (
    ("nthreads", r"\bnThreads?:?\s+(\d+)"),
    ("ngpus", r"\bnGpus:?\s+(\d+)"),
    ("ranks_per_gpu", r"\bnRanks:?\s+(\d+)"),  # rccl-tests 2022-2024: several ranks on one GPU
    ("min_bytes", r"\bminBytes:?\s+(\d+)"),
    ("max_bytes", r"\bmaxBytes:?\s+(\d+)"),
    ("step", r"\bstep:\s+(\d+)\("),
    ("warmup_iters", r"\bwarmup ?[iI]ters:\s+(\d+)"),
    ("iters", r"(?:^|\d\s)iters:\s+(\d+)"),  # the `iters:` right after a number, not warmup/agg iters
    ("agg_iters", r"\bagg iters:\s+(\d+)"),
    ("validation", r"\bvalidation:\s+(\d+)"),
    ("graph", r"\bgraph:\s+(\d+)"),
    ("unalign", r"\bunalign:\s+(\d+)"),
)
_NOTES = (  # '#' lines the tool prints around a run, kept in its config
    (re.compile(r"^#\s*Blocking Enabled"), "blocking", True),
    (re.compile(r"^#\s*Per-Iteration Report"), "per_iter_timing", True),
    (re.compile(r"^#\s*Parallel Init Enabled"), "parallel_init", True),
)
_LEAD = ("size", "count", "type", "redop", "root")
_PER_ITER = ("i_min", "i_max", "i_p99", "i_cv%")
_BLOCK_NAMES = {"algbw", "busbw", "#wrong", "error", *_PER_ITER}


@dataclass
class _Table:
    """The columns one header declares."""

    lead: list[str]
    blocks: list[tuple[str, list[str]]]  # (placement, column names after time)
    check: str  # "#wrong" or "error"
    timestamp: bool = False
    algo: bool = False  # rccl-tests -M 1: algo proto nchannels

    @property
    def width(self) -> int:
        return len(self.lead) + sum(1 + len(b) for _, b in self.blocks) + 2 * self.timestamp + 3 * self.algo


def _table(line: str, places: list[str], source: str, lineno: int) -> _Table:
    tokens = line.lstrip("#").split()
    if tokens[:2] == ["bytes", "N"]:
        raise ParseError(source, lineno, "nccl-tests 1.x output (2017-2019, times in ms) is not supported", line)
    lead = []
    while tokens and tokens[0] in _LEAD:
        lead.append(tokens.pop(0))
    if lead[:3] != ["size", "count", "type"]:
        raise ParseError(source, lineno, "unknown table header", line)
    blocks: list[list[str]] = []
    table = _Table(lead, [], check="")
    for tok in tokens:
        if tok in ("time", "cputime"):
            blocks.append([])
        elif tok in _BLOCK_NAMES and blocks and not table.timestamp and not table.algo:
            blocks[-1].append(tok)
        elif tok == "timestamp":
            table.timestamp = True
        elif tok in ("algo", "proto", "nchannels"):
            table.algo = True
        else:
            raise ParseError(source, lineno, f"unknown column {tok!r} in the table header", line)
    for b in blocks:
        if b[:2] != ["algbw", "busbw"] or len(b) < 3 or b[2] not in ("#wrong", "error") or \
                b[3:] not in ([], list(_PER_ITER)):
            raise ParseError(source, lineno, "unknown table header", line)
    if not blocks or len(blocks) > 2 or (places and len(places) != len(blocks)):
        raise ParseError(source, lineno, "unknown table header (placements)", line)
    if len(blocks) == 2:
        order = ["out", "in"]
    else:  # rccl-tests -O prints one placement; its group line says which
        order = ["in"] if places == ["in"] else ["out"]
    table.blocks = list(zip(order, blocks))
    table.check = blocks[0][2]
    return table


def _number(tok: str, what: str, source: str, lineno: int, line: str) -> tuple[float, float]:
    f = model.figure(tok)
    if f is None:
        raise ParseError(source, lineno, f"{what} {tok!r} is not a number", line)
    return f


def _row(line: str, table: _Table, source: str, lineno: int) -> list[Row]:
    tokens = line.split()
    if table.algo and len(tokens) == table.width - 1:
        # rccl-tests prints algo with %8s right after the last figure: a long name (CollNetDirect) touches it.
        at = table.width - 4
        m = _GLUED.match(tokens[at]) if at < len(tokens) else None
        if m:
            tokens[at:at + 1] = [m.group(1), m.group(2)]
    if len(tokens) == table.width - 1 and table.lead[3:5] == ["redop", "root"] and len(tokens) > 3 \
            and model.integer(tokens[3]) is not None:
        tokens.insert(3, "")  # hypercube_perf prints its redop column empty: the root's number sits under it
    if len(tokens) != table.width:
        raise ParseError(source, lineno,
                         f"a result row with {len(tokens)} fields where the header declares {table.width}", line)
    lead = dict(zip(table.lead, tokens))
    size, count = model.integer(lead["size"]), model.integer(lead["count"])
    if size is None or count is None:
        raise ParseError(source, lineno, "size and count must be whole numbers", line)
    type_name = lead["type"]
    if model.dtype_of(type_name) is None:
        raise ParseError(source, lineno, f"unknown data type {type_name!r}", line)
    redop = lead.get("redop") or None
    if redop is not None and redop not in model.REDOPS:
        raise ParseError(source, lineno, f"unknown reduction {redop!r}", line)
    root = None
    if "root" in lead:
        root = model.integer(lead["root"])
        if root is None:
            raise ParseError(source, lineno, f"root {lead['root']!r} is not a number", line)
    at = len(table.lead)
    rows = []
    for placement, cols in table.blocks:
        time_us, time_tol = _number(tokens[at], "time", source, lineno, line)
        values = dict(zip(cols, tokens[at + 1:at + 1 + len(cols)]))
        at += 1 + len(cols)
        algbw, algbw_tol = _number(values["algbw"], "algbw", source, lineno, line)
        busbw, busbw_tol = _number(values["busbw"], "busbw", source, lineno, line)
        row = Row(line=lineno, size=size, count=count, type=type_name, redop=redop, root=root,
                  placement=placement, time_us=time_us, algbw=algbw, busbw=busbw, wrong=None,
                  time_tol=time_tol, algbw_tol=algbw_tol, busbw_tol=busbw_tol)
        check = values.get("#wrong", values.get("error"))
        if check != "N/A":
            if "#wrong" in values:
                row.wrong = model.count(check)
                if row.wrong is None:
                    raise ParseError(source, lineno, f"#wrong {check!r} is not a count", line)
            else:  # before 2.13: the max absolute deviation, '%5.0le'; rccl-tests appends '*' above its bound
                row.flagged = check.endswith("*")
                row.error = _number(check.rstrip("*"), "error", source, lineno, line)[0]
        for name in _PER_ITER:
            if name in values:
                row.extra[name] = _number(values[name], name, source, lineno, line)[0]
        rows.append(row)
    if table.timestamp:
        stamp = " ".join(tokens[at:at + 2])
        if not model.STAMP.match(stamp):
            raise ParseError(source, lineno, f"timestamp {stamp!r} is not YYYY-mm-dd HH:MM:SS", line)
        for r in rows:
            r.extra["timestamp"] = stamp
        at += 2
    if table.algo:
        algo, proto, channels = tokens[at:at + 3]
        for r in rows:
            r.extra.update(algo=algo, proto=proto, nchannels=model.integer(channels))
    return rows


@dataclass
class _Reader:
    source: str
    user_collective: str | None
    tool: str
    runs: list[Run] = field(default_factory=list)
    cur: Run | None = None
    hints: set[str] = field(default_factory=set)  # collectives named by command lines echoed for cur
    pending: dict = field(default_factory=dict)  # what was printed before the run it belongs to began
    table: _Table | None = None
    places: list[str] = field(default_factory=list)
    in_table: bool = False
    footer: bool = False  # cur printed its footer: later version lines belong to the next run
    prefixes: Prefixes = field(default_factory=Prefixes)  # what stands before the tool's text on this log's lines
    ranks: int | None = None  # --ranks: the world size where the log does not list it
    loose: list[tuple[int, str]] = field(default_factory=list)  # cur's result rows that no header preceded

    # -- runs ---------------------------------------------------------------------------------------------
    def start(self, lineno: int) -> Run:
        self.close()
        run = Run(source=self.source, line=lineno, tool=self.tool)
        pending, self.pending = self.pending, {}
        self.hints = pending.pop("hints", set())
        if pending.pop("rccl", False):
            run.tool, run.tool_detected = "rccl-tests", True
        run.config.update(pending.pop("config", {}))
        run.nccl_version = pending.pop("nccl_version", None)
        run.warnings = pending.pop("warnings", [])
        self.cur, self.table, self.in_table, self.footer = run, None, False, False
        return run

    def close(self) -> None:
        run, self.cur = self.cur, None
        if run is None:
            return
        if self.loose:
            self.settle(run)
        model.world(run)
        if run.rows and (run.world_size is None or self.ranks):
            model.infer_world(run, self.ranks, model.named(run, self.user_collective, self.hints))
        model.collective(run, self.user_collective, self.hints)
        if model.contradicts(run):  # the device lines were cut short: what they show is a lower bound
            model.infer_world(run, None)
        self.runs.append(run)

    def settle(self, run: Run) -> None:
        """Read the result rows that came without a table header, under the header their fields settle."""
        loose, self.loose = self.loose, []
        header = headerless.columns(loose, self.source)
        table = _table(header, ["out", "in"], self.source, loose[0][0])
        run.columns, run.generation = tuple(table.lead), "pre-2.13" if table.check == "error" else "2.13+"
        run.config["header_from_rows"] = header.lstrip("# ")
        for lineno, line in loose:
            rows = _row(line, table, self.source, lineno)
            if any(r.flagged for r in rows):
                run.tool, run.tool_detected = "rccl-tests", True
            run.rows.extend(rows)

    def run(self, lineno: int) -> Run:
        return self.cur if self.cur is not None else self.start(lineno)

    def target(self) -> Run | None:
        """The run a version/banner line describes: the open one, else (None) the next."""
        return self.cur if self.cur is not None and not self.footer else None

    def rccl(self) -> None:
        run = self.target()
        if run is None:
            self.pending["rccl"] = True
        else:
            run.tool, run.tool_detected = "rccl-tests", True

    def note(self, key: str, value) -> None:
        run = self.target()
        if run is None:
            self.pending.setdefault("config", {})[key] = value
        else:
            run.config[key] = value

    # -- lines ----------------------------------------------------------------------------------------------
    def feed(self, lineno: int, raw: str) -> None:
        line = self.prefixes.strip(raw).rstrip()
        if not line.strip():
            return
        if not line.startswith("#"):
            # rccl-tests on gfx942 prints its FNUZ notice without a newline: the next line is glued to it.
            for marker in ("# Collective test starting:", "# nThread"):
                at = line.find(marker)
                if at > 0:
                    if "FNUZ" in line[:at]:
                        self.rccl()
                        self.pending.setdefault("config", {})["fp8_fnuz"] = True
                    line = line[at:]
                    break
        if line.startswith("#"):
            self.comment(lineno, line)
        else:
            self.other(lineno, line)

    def comment(self, lineno: int, line: str) -> None:
        cur = self.cur
        if m := _VERSION.match(line):
            run = self.start(lineno) if cur is None or "nthreads" in cur.config or cur.collective or self.loose \
                else cur
            run.tool, run.version, run.tool_detected = m.group(1), m.group(2), True
            if m.group(3):
                run.config["git"] = m.group(3)
            if m.group(4):  # the NCCL the binary was built against decides how it allocates its buffers
                run.config["nccl_headers"] = int(m.group(4))
            if m.group(5):
                run.nccl_version = model.nccl_version(int(m.group(5)))
            return
        if m := _START.match(line):
            run = self.start(lineno) if cur is None or "nthreads" in cur.config or cur.collective or self.loose \
                else cur
            run.collective = model.collective_of_binary(m.group(1))
            if run.collective is None:
                raise ParseError(self.source, lineno, f"unknown nccl-tests binary {m.group(1)!r}", line)
            return
        if _CONFIG.match(line):
            run = self.start(lineno) if cur is None or "nthreads" in cur.config or self.loose else cur
            self.config(run, lineno, line)
            return
        if _DEVICE_LIKE.match(line):
            m = _DEVICE.match(line)
            if m is None or line.endswith("..."):
                why = ("device list cut short by nccl-tests (over 2 kB of device lines per process): the world "
                       "size is unknown") if line.endswith("...") else "unreadable device line"
                raise ParseError(self.source, lineno, why, line)
            rank, group, pid, host, dev, bus, name = m.groups()
            if bus and "." in bus:  # rccl-tests prints the full PCI id, 0000:c1:00.0
                self.rccl()
            self.run(lineno).devices.append(Device(
                rank=int(rank), host=host, device=int(dev), name=name, pid=int(pid),
                group=int(group) if group is not None else None, bus=bus))
            return
        if _NAMES.match(line):
            run = self.start(lineno) if self.loose else self.run(lineno)
            self.table = _table(line, self.places, self.source, lineno)
            self.places, self.in_table = [], True
            run.columns = tuple(self.table.lead)
            run.generation = "pre-2.13" if self.table.check == "error" else "2.13+"
            if any(c == "cputime" for c in line.split()):
                run.config["cputime"] = True
            if self.table.timestamp:
                run.config["timestamps"] = True
            return
        if _PLACES.search(line) and not _UNITS.match(line):
            self.places = ["out" if p == "out-of-place" else "in" for p in _PLACES.findall(line)]
            return
        self.footer_or_note(lineno, line)

    def footer_or_note(self, lineno: int, line: str) -> None:
        """The '#' lines after the table's rows: its footer, and the notes the tool prints around a run."""
        if m := _OOB.match(line):
            run = self.run(lineno)
            run.out_of_bounds, run.out_of_bounds_ok = int(m.group(1)), m.group(2) == "OK"
            self.in_table, self.footer = False, True
            return
        if m := _AVG.match(line):
            run = self.run(lineno)
            value = model.figure(m.group(1))
            run.avg_busbw, run.avg_busbw_tol = value if value else (None, 0.0)
            if m.group(2):
                run.config["min_bw_check"] = m.group(2)
            self.in_table, self.footer = False, True
            return
        if _CONCLUDED.match(line):
            self.in_table, self.footer = False, True
            return
        if line.startswith("# Errors with asterisks"):
            self.rccl()
            return
        if m := re.match(r"^#\s*Writing JSON output to\s+(\S+)", line):
            self.note("json_output", m.group(1))
            return
        if m := re.match(r"^#\s*Reducing maxBytes to\s+(\d+)", line):
            self.note("max_bytes_reduced", int(m.group(1)))
            return
        if m := re.match(r"^#\s*error:\s*(.*)$", line):
            if self.cur is not None:
                self.cur.errors.append(m.group(1))
            return
        if m := re.match(r"^#\s*Testing (\d+) cycle", line):
            self.note("cycles", int(m.group(1)))
            return
        for pattern, key, value in _NOTES:
            if pattern.match(line):
                self.note(key, value)
                return
        # Anything else after '#' (separators, units, "# Using devices", GPU memory report) says nothing new, but
        # for a command after a root prompt or in a script's comment (`# ./build/all_gather_perf -b 8 ...`).
        self.hint(line)

    def config(self, run: Run, lineno: int, line: str) -> None:
        for key, pattern in _CONFIG_FIELDS:
            m = re.search(pattern, line)
            if m:
                run.config[key] = int(m.group(1))
        missing = [k for k in ("nthreads", "ngpus", "min_bytes", "max_bytes") if k not in run.config]
        if missing:
            raise ParseError(self.source, lineno, f"unreadable run configuration (no {', '.join(missing)})", line)
        if m := re.search(r"\bstep:\s+\d+\((factor|bytes)\)", line):
            run.config["step_kind"] = m.group(1)
        if re.search(r"\bnThreads?:", line):  # rccl-tests 2019-2024 printed `key: value`
            self.rccl()

    def other(self, lineno: int, line: str) -> None:
        if (self.in_table and _ROW_LOOSE.match(line)) or _ROW_STRICT.match(line):
            if not self.in_table or self.table is None:
                if self.footer:
                    raise ParseError(self.source, lineno, "a result row after its table's footer", line)
                self.run(lineno)  # a paste that starts at its rows: their header is settled as the run ends
                self.loose.append((lineno, line))
                return
            rows = _row(line, self.table, self.source, lineno)
            if any(r.flagged for r in rows):
                self.rccl()
            self.cur.rows.extend(rows)
            return
        if self.in_table and _ROW_INSIDE.search(line):
            raise ParseError(self.source, lineno, "a result row behind a line prefix gpubench does not know", line)
        if m := _FAILURE.search(line):
            run = self.cur if self.cur is not None and not self.footer else self.start(lineno)
            if run.failure is None:
                run.failure = m.group(0).strip()
            return
        if m := _WARN.search(line):
            warnings = self.cur.warnings if self.cur is not None else self.pending.setdefault("warnings", [])
            warnings[:] = (warnings + [m.group(1).strip()])[-5:]
            return
        if m := _RCCL_TESTS.match(line):
            self.rccl()
            run = self.target()
            if run is not None:
                run.version = m.group(1)
            return
        if m := _BANNER.search(line):
            self.rccl()
            if m.group(1) == "RCCL":
                self.version(m.group(2))
            else:
                self.note(f"{m.group(1).lower()}_version", m.group(2))
            return
        if _RCCL_LINES.match(line):
            self.rccl()
            return
        if m := _NCCL_VERSION.search(line):
            self.version(m.group(1))
            return
        self.hint(line)

    def hint(self, line: str) -> None:
        """A command line echoed in the log names the collective of the run it precedes (a line naming several,
        a loop over binaries, names none)."""
        found = model.hinted(line)
        if len(found) == 1:
            if self.cur is None or self.footer or self.cur.rows:
                self.pending.setdefault("hints", set()).update(found)
            else:
                self.hints |= found

    def version(self, text: str) -> None:
        run = self.target()
        if run is None:
            self.pending["nccl_version"] = text
        elif run.nccl_version is None:
            run.nccl_version = text


def parse_text(text: str, source: str = "<text>", *, collective: str | None = None,
               tool: str = "nccl-tests", ranks: int | None = None) -> list[Run]:
    """The runs of an nccl-tests / rccl-tests text log.

    ``collective`` (the user's ``--collective``) labels runs whose log does not name their binary; ``tool`` is
    assumed where the log's content does not say which tool printed it.
    """
    lines = text.splitlines()
    reader = _Reader(source, collective, tool, prefixes=Prefixes.learn(lines), ranks=ranks)
    for lineno, raw in enumerate(lines, 1):
        reader.feed(lineno, raw)
    reader.close()
    return reader.runs


def strip_prefix(line: str) -> str:
    """The line without a known launcher's prefix (unchanged when it has none); a log's own prefixes are learnt
    by :class:`gpubench.nccltests.prefix.Prefixes`."""
    return Prefixes().strip(line)


__all__ = ["parse_text", "strip_prefix"]
