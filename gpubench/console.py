"""What the user sees in the terminal: a progress bar during a run and a summary table after it.

On a terminal, rich draws a live bar; in a log (CI, ``| tee``) each case prints one line instead, so that a
long sweep shows progress there too.
"""

from __future__ import annotations

import math
import numbers
import os
import re
import sys
import textwrap
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, SupportsFloat

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gpubench.machine.contention import LOADED_HOST
from gpubench.units import format_bytes

if TYPE_CHECKING:
    import pandas as pd
    from rich.progress import Progress

    from gpubench.suite import Case, Suite

# pandas (the summary tables), numpy (gpubench.results.host_set) and rich's live progress bar are imported where they are
# used: gpubench list and compare's formats import this module for its number formats and consoles alone.

_STATUS_STYLE = {"ok": "green", "invalid": "bold red", "error": "red", "skipped": "yellow"}


def err_console() -> Console:
    return Console(stderr=True)


def fmt_value(value: SupportsFloat | None) -> str:
    """Four significant digits, never an exponent, thousands grouped: 12,439, 7,962 and 0.00001234, not
    1.244e+04, 7962 and 1.234e-05."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    v = float(value)
    if v == 0:
        return "0"
    if not math.isfinite(v):
        return str(v)
    if abs(v) >= 1e3:
        return f"{v:,.0f}"
    if abs(v) >= 1e-4:
        return f"{v:.4g}"
    return f"{v:.{3 - math.floor(math.log10(abs(v)))}f}".rstrip("0")


def two_digits(value: float) -> str:
    """Two significant digits, as fmt_value writes numbers: 110, 3.5, 0.048 (a spread, a p-value)."""
    return fmt_value(float(f"{value:.2g}")) if math.isfinite(value) else str(value)


def p_text(p: float) -> str:
    """A p-value: two significant digits, and below 0.0001 just that (tiny p-values say nothing more)."""
    return "<0.0001" if 0 <= p < 1e-4 else two_digits(p)


# Units as people read them (the tables store plain ASCII: "us").
_UNIT_TEXT = {"us": "µs"}
# One dtype vocabulary on screen: comm's tables store torch's names (their case ids), the other suites short ones.
_DTYPE_TEXT = {"float64": "fp64", "float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def unit_text(unit: object) -> str:
    return _UNIT_TEXT.get(str(unit), str(unit))


def _headline(rows: list[dict]) -> str:
    r = rows[0]
    if r["status"] != "ok":
        return f"{r['status']}: {r['message']}"
    cv = r["cv"]
    # Below 0.001 % a spread is rounding in the clock, not noise: "±0%", never "±0.000000000000013%".
    cv_text = "" if cv is None or math.isnan(cv) else f" ±{two_digits(100 * cv) if cv >= 1e-5 else '0'}%"
    shared = [f"({s})" for s in (_beside(r),) if s]
    return " ".join([f"{fmt_value(r['value'])} {unit_text(r['unit'])}{cv_text}", *shared])


def _beside(r: Mapping[str, Any] | pd.Series) -> str:
    """``shared: pid 607 (python3)``, ``host busy: 95%``: who else used the machine while an ok row's case was
    measured (its GPU, or a host busy enough to move a figure the host sets), or ""."""
    from gpubench.results.host_set import disturbed_by_load

    row = dict(r)
    said = []
    if isinstance(row.get("contended"), str) and row["contended"]:
        said.append(f"shared: {row['contended']}")
    load = row.get("host_load")
    if isinstance(load, numbers.Real) and not math.isnan(load) and load >= LOADED_HOST and disturbed_by_load(row):
        said.append(f"host busy: {100 * load:.0f}%")
    return "; ".join(said)


class ProgressSink(Protocol):
    """What the runner tells whoever shows a run's progress (:func:`gpubench.run.runner.execute`): the cases to
    come, each case's rows as it ends, and notes (the plan's, a busy host's). :class:`RunProgress` is the terminal's."""

    def start(self, total: int) -> None: ...
    def advance(self, suite: Suite, case: Case, rows: list[dict]) -> None: ...
    def note(self, text: str) -> None: ...


class RunProgress:
    """The runner's progress sink (see :func:`gpubench.run.runner.execute`)."""

    def __init__(self, console: Console | None = None):
        self.console = console or err_console()
        self.live = self.console.is_terminal
        self._progress: Progress | None = None
        self._done = 0
        self._total = 0
        # A skip is said once per reason (its figures aside: "needs 2 TiB" and "needs 3 TiB" are one reason):
        # a CPU run of gemm skips dozens of GPU-only cases for one reason, which the summary says once too.
        self._reasons: set[str] = set()
        self._unsaid = 0
        # Skips, and the notes given before the first case (the plan's, a busy host's), are held back while no case
        # has run: a run of nothing but cases too large for this machine ends in one line (gpubench.commands.run),
        # and these would only repeat it or speak of a host for input that is refused.
        self._held: list[tuple[str, bool]] | None = []  # (line, a note)
        self._started = False

    def start(self, total: int) -> None:
        self._total = total
        self._started = True
        if self.live:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("measuring", total=total)

    def advance(self, suite: Suite, case: Case, rows: list[dict]) -> None:
        self._done += 1
        skipped = bool(rows) and rows[0]["status"] == "skipped"
        said = True
        if skipped:
            reason = re.sub(r"\d[\d.,]*", "#", str(rows[0]["message"]))
            said = reason not in self._reasons
            self._reasons.add(reason)
            self._unsaid += not said
        if said:
            line = f"[{self._done}/{self._total}] {suite.name} {case_text(case.params)}: {_headline(rows)}"
            if skipped and self._held is not None:
                self._held.append((line, False))
            else:
                self._release()
                self._say(line)
        if self._progress is not None:
            self._progress.update(self._task, advance=1, description=f"{suite.name}")

    def note(self, text: str) -> None:
        if self._held is not None and not self._started:
            self._held.append((text, True))
        else:
            self.console.print(text, markup=False)

    def _release(self) -> None:
        held, self._held = self._held or [], None
        for line, note in held:
            self.console.print(line, markup=False) if note else self._say(line)

    def _say(self, line: str) -> None:
        if self._progress is not None:
            self._progress.console.print(line, markup=False, highlight=False)
        else:
            # One write, the newline in it: a rank's closing line (gpubench.ranks.ending, from its signal thread) landed
            # between print()'s line and its end, where no search for "gpubench: error:" at a line's start finds it
            # (docs/measurements.md, 'Faults').
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def discard(self) -> None:
        """Forget the skips and notes held back (the run's one line says what they would have said)."""
        self._held, self._unsaid = None, 0

    def stop(self) -> None:
        self._release()
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        if self._unsaid:
            self.console.print(f"{self._unsaid} more case(s) skipped for a reason said above", markup=False)
            self._unsaid = 0


def summary_tables(
    df: pd.DataFrame, params_of: dict[str, tuple[str, ...]], shown_of: dict[str, tuple[str, ...]] | None = None,
    blocks_of: dict[str, tuple[str, ...]] | None = None,
) -> list[Table]:
    """One table per suite (or per block of it, where the suite names block columns: comm one per collective),
    one line per case: its parameters, its first metric's median and spread (and the medians of any further
    metrics the suite shows, e.g. comm's algbw and busbw), the SM clock seen while it ran, and its status.
    Parameters with one value over the whole table go into a line above it; cases skipped for the same reason
    collapse into one line below it ("37 cases skipped: needs a GPU")."""
    return [_suite_table(str(suite), rows, params_of.get(suite, ()), (shown_of or {}).get(suite, ()))
            for suite, rows in _blocks(df, blocks_of or {})]


def _suite_table(suite: str, rows: pd.DataFrame, params_given: tuple[str, ...],
                 shown_metrics: tuple[str, ...]) -> Table:
    """One suite's (or block's) table: see :func:`summary_tables`."""
    rows = rows.assign(_gpu=_gpu_labels(rows))
    many = rows["_gpu"].nunique() > 1  # a --devices run: one line per (GPU, case)
    first = rows.drop_duplicates(subset=["_gpu", "case"], keep="first")
    metric, unit = first["metric"].iloc[0], first["unit"].iloc[0]
    more = [m for m in shown_metrics if m != metric]
    units = {m: rows.loc[rows["metric"] == m, "unit"].iloc[0] for m in more if (rows["metric"] == m).any()}
    values = {m: rows[rows["metric"] == m].set_index(["_gpu", "case"])["value"] for m in units}
    params = [p for p in params_given if p in first.columns]
    skipped = first[first["status"] == "skipped"].groupby("message", sort=False).size()
    collapsed = [(msg, count) for msg, count in skipped.items() if count > 1]
    shown = first[~((first["status"] == "skipped") & first["message"].isin([m for m, _ in collapsed]))]
    constant = [p for p in params if len(shown) > 1 and shown[p].astype(str).nunique() == 1]
    params = [p for p in params if p not in constant]
    title = f"{suite} (v{first['suite_version'].iloc[0]})"
    if constant:
        title += "\n" + ", ".join(f"{p}={param_text(p, shown[p].iloc[0])}" for p in constant)
    caption = "\n".join(f"{count} cases skipped: {msg}" for msg, count in collapsed) or None
    if shown.empty:  # every case skipped for a reason shared with others: the reasons are the table
        table = Table(title=escape(title), title_justify="left", show_header=False)
        table.add_column("skipped")
        for line in (caption or "").splitlines():
            table.add_row(escape(line))
        return table
    clocks = "sm_clock_mhz" in shown.columns and shown["sm_clock_mhz"].notna().any()
    table = Table(title=escape(title), title_justify="left", caption=escape(caption) if caption else None,
                  caption_justify="left")
    heads = (f"{metric} [{unit_text(unit)}]", "cv [%]", *(f"{m} [{unit_text(u)}]" for m, u in units.items()),
             "n", *(["SM clock [MHz]"] if clocks else []))
    for col in [*(["gpu"] if many else []), *params]:
        table.add_column(col)
    for col in heads:
        table.add_column(escape(col), justify="right")
    table.add_column("status")
    for _, r in shown.iterrows():
        table.add_row(
            *([r["_gpu"]] if many else []), *[escape(param_text(p, r[p])) for p in params],
            fmt_value(r["value"]), _cv_cell(r["cv"]),
            *(fmt_value(values[m].get((r["_gpu"], r["case"]))) for m in units),
            str(int(r["n"])), *([fmt_value(r["sm_clock_mhz"])] if clocks else []), _status_cell(r),
        )
    return table


def cost_line(df: pd.DataFrame) -> str | None:
    """What the run's cases cost, by suite, the largest first (``case_s``: inputs, warm-up, samples and check, each
    process's time on a figure included); devices that measured at once count as their slowest. None where no
    row says (older tables)."""
    if "case_s" not in df.columns or not df["case_s"].notna().any():
        return None
    one = df[df["case_s"].notna()].drop_duplicates(["suite", "case", "host", "device_index"])
    per_device = one.groupby(["suite", "host", "device_index"], dropna=False)["case_s"].sum()
    by_suite = per_device.groupby(level="suite").max().sort_values(ascending=False)
    parts = ", ".join(f"{suite} {seconds:.1f} s" for suite, seconds in by_suite.items())
    return f"the cases took {by_suite.sum():.1f} s: {parts}"


def _cv_cell(cv: float | None) -> str:
    return "—" if cv is None or (isinstance(cv, float) and math.isnan(cv)) else f"{100 * cv:.2f}"


def _status_cell(r: Mapping[str, Any] | pd.Series) -> str:
    """``ok``, ``ok (noisy, shared: pid 607 (python3))`` or ``error: <message>``, styled by status."""
    status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r['message']}"
    if r["status"] == "ok":
        flags = [name for name, col in (("noisy", "noisy"), ("host-bound", "host_bound")) if _set(r.get(col))]
        flags += [s for s in (_beside(r),) if s]
        status = f"ok ({', '.join(flags)})" if flags else "ok"
    return f"[{_STATUS_STYLE.get(r['status'], '')}]{escape(status)}[/]"


def _blocks(df: pd.DataFrame, blocks_of: dict[str, tuple[str, ...]]):
    """(suite, rows) per table: a suite's rows whole, or split by the block columns it names, in run order."""
    for suite, rows in df.groupby("suite", sort=False):
        keys = [c for c in blocks_of.get(suite, ()) if c in rows.columns]
        if not keys:
            yield suite, rows
            continue
        for _, block in rows.groupby(keys, sort=False, dropna=False):
            yield suite, block


def _set(flag: object) -> bool:
    """A boolean column's value, where missing (None, NaN: an older table, not measured) reads as not set."""
    return flag is not None and not (isinstance(flag, float) and math.isnan(flag)) and bool(flag)


def _gpu_labels(rows: pd.DataFrame) -> pd.Series:
    """``index`` of each row's device, ``host:index`` when the rows come from several hosts."""
    import pandas as pd

    idx = pd.to_numeric(rows["device_index"], errors="coerce").fillna(0).astype(int).astype(str)
    hosts = rows["host"].fillna("?").astype(str)
    return hosts + ":" + idx if hosts.nunique() > 1 else idx


def case_text(params: Iterable[tuple[str, object]]) -> str:
    """A case's parameters as people read them (``op=copy,dtype=fp32,array_bytes=128 MiB``), its id's order."""
    return ",".join(f"{k}={param_text(k, v)}" for k, v in params)


def param_text(name: str, value: object) -> str:
    """A parameter's value as every screen shows it: byte counts in binary units (``128 MiB``), one dtype
    vocabulary (``fp32``), whole floats without their ``.0``; a value read from a case id (text) alike."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if name == "dtype":
        return _DTYPE_TEXT.get(str(value), str(value))
    if "bytes" in name and isinstance(value, numbers.Real) and not math.isnan(value):
        return format_bytes(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # an int column that pandas widened to float (another suite's rows are NaN)
    return str(value)


def _stated_columns() -> int | None:
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


def out_console() -> Console:
    # In a log or a pipe (not a terminal) rich would wrap and cut tables at 80 columns; a log has room, unless
    # whoever reads it says how wide it is (COLUMNS).
    c = Console()
    if c.is_terminal:
        return c
    return Console(width=_stated_columns() or 240)


def say(console: Console, text: str) -> None:
    """A line of prose (a run's closing lines) as its reader's width takes it: folded between words, never inside
    one; a word longer than the width (a path) kept whole on a line of its own. A terminal left to fold it cuts
    words at its edge. In a log of no stated width (no terminal, no COLUMNS) it stays one line, for grep."""
    if not (console.is_terminal or _stated_columns()):
        console.print(text, markup=False, highlight=False, soft_wrap=True)
        return
    for line in textwrap.wrap(text, console.width, break_long_words=False, break_on_hyphens=False) or [""]:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
