"""Result rows pasted without the table header above them (the banner cut off, as in NVIDIA/nccl-tests#294): which
columns they are, settled from the rows themselves.

Every generation prints a row as ``size count type``, then ``redop`` and ``root`` where its header has them (both
from 2.13; before, ``redop`` for reducing collectives and alltoall, ``root`` for rooted ones), then per placement
``time algbw busbw`` and the check (``#wrong`` from 2.13: an element count, ``%g``, or N/A; ``error`` before:
``%5.0le``, N/A, rccl-tests appending ``*``), with ``-I 1`` the four per-iteration figures after each placement,
after both ``-S 1``'s timestamp and rccl-tests ``-M 1``'s ``algo proto nchannels``. Out of those a layout fits a row
when every field reads as its column does and each placement's algbw is size / time (µs) within the printed
digits — or (n - 1) / n of it, as all_gather and reduce_scatter printed before 2020. The rows settle the table when
exactly one layout fits all of them and it has both placements: a row of one placement does not say which it is.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass

from gpubench.nccltests import model
from gpubench.nccltests.model import ParseError

_WRONG = re.compile(r"^(?:\d+|\d(?:\.\d+)?e\+\d+|N/A)$")  # 2.13+: a count (%g, so 1.04858e+06 past a million)
_ERROR = re.compile(r"^(?:\d(?:\.\d+)?e[-+]\d+|[-+]?nan|N/A)\*?$")  # before: the max deviation, %5.0le
_PER_ITER = ("i_min", "i_max", "i_p99", "i_cv%")


@dataclass(frozen=True)
class Layout:
    """One way nccl-tests lays out a result row."""

    redop: bool
    root: bool
    placements: int  # 2 (out-of-place, then in-place) or 1 (rccl-tests -O)
    per_iter: bool  # -I 1 (nccl-tests 2.19.2+, both placements)
    timestamp: bool  # -S 1
    algo: bool  # rccl-tests -M 1

    @property
    def lead(self) -> int:
        return 3 + self.redop + self.root

    @property
    def width(self) -> int:
        block = 4 + 4 * self.per_iter
        return self.lead + self.placements * block + 2 * self.timestamp + 3 * self.algo

    def header(self, check: str) -> str:
        """The header line nccl-tests would have printed above such rows."""
        names = ["size", "count", "type"] + ["redop"] * self.redop + ["root"] * self.root
        for _ in range(self.placements):
            names += ["time", "algbw", "busbw", check] + list(_PER_ITER) * self.per_iter
        names += ["timestamp"] * self.timestamp + ["algo", "proto", "nchannels"] * self.algo
        return "#  " + "  ".join(names)


LAYOUTS = [Layout(redop, root, placements, per_iter, stamp, algo)
           for redop, root, placements, per_iter, stamp, algo in itertools.product(
               (True, False), (True, False), (2, 1), (False, True), (False, True), (False, True))
           if not (per_iter and placements == 1)]


def _time_fits(size: int, time: tuple[float, float], algbw: tuple[float, float]) -> bool:
    """algbw = size / time within both figures' rounding (1 µs × 1 GB/s = 1 kB), or down to half of it."""
    (t, t_tol), (a, a_tol) = time, algbw
    if size <= 0 or not all(math.isfinite(v) for v in (t, t_tol, a, a_tol)):
        return True
    lo = max(a - a_tol, 0.0) * max(t - t_tol, 0.0) * 1e3 / size
    hi = (a + a_tol) * (t + t_tol) * 1e3 / size
    return hi >= 0.5 * (1 - 1e-9) and lo <= 1 + 1e-9


def _fits(tokens: list[str], layout: Layout) -> set[str]:
    """The check columns (``#wrong``, ``error``) with which ``layout`` reads the row; empty when it does not."""
    if len(tokens) != layout.width or model.integer(tokens[0]) is None or model.integer(tokens[1]) is None \
            or model.dtype_of(tokens[2]) is None:
        return set()
    at = 3
    if layout.redop:
        if tokens[at] not in model.REDOPS:
            return set()
        at += 1
    if layout.root:
        if model.integer(tokens[at]) is None:
            return set()
        at += 1
    checks = {"#wrong", "error"}
    for _ in range(layout.placements):
        figures = [model.figure(t) for t in tokens[at:at + 3]]
        if None in figures or not _time_fits(int(tokens[0]), figures[0], figures[1]):
            return set()
        checks &= {name for name, form in (("#wrong", _WRONG), ("error", _ERROR)) if form.match(tokens[at + 3])}
        at += 4
        if layout.per_iter:
            if any(model.figure(t) is None for t in tokens[at:at + 4]):
                return set()
            at += 4
    if layout.timestamp:
        if not model.STAMP.match(" ".join(tokens[at:at + 2])):
            return set()
        at += 2
    if layout.algo:
        algo, proto, channels = tokens[at:at + 3]
        if model.figure(algo) is not None or model.figure(proto) is not None or model.integer(channels) is None:
            return set()
    return checks


def _check(layout: Layout, checks: set[str]) -> str | None:
    """The check column of a layout the rows fit: 2.13+ headers always have both redop and root and a #wrong
    count; before 2.13 only reduce had both, and the column was the error."""
    if layout.redop and layout.root and "#wrong" in checks:
        return "#wrong"
    return "error" if "error" in checks else None


def columns(rows: list[tuple[int, str]], source: str) -> str:
    """The header line nccl-tests printed above ``rows`` ((line number, text) pairs without a header), settled
    from the rows; a :class:`ParseError` naming the row where they stop settling it."""
    fits = {layout: {"#wrong", "error"} for layout in LAYOUTS}
    for lineno, line in rows:
        tokens = line.split()
        fits = {layout: checks & _fits(tokens, layout) for layout, checks in fits.items()}
        fits = {layout: checks for layout, checks in fits.items() if checks}
        if not fits:
            what = "its fields fit no column layout nccl-tests or rccl-tests prints" if lineno == rows[0][0] else \
                "it does not read as the rows above it do"
            raise ParseError(source, lineno, f"a result row before any table header, and {what}: paste the "
                                             "table's header lines with the rows", line)
    settled = {layout: check for layout, checks in fits.items() if (check := _check(layout, checks))}
    first, text = rows[0]
    if len(settled) != 1:
        raise ParseError(source, first, f"result rows without a table header, and their {len(text.split())} "
                                        f"fields fit {len(settled) or 'no'} column layouts: paste the table's "
                                        "header lines with the rows", text)
    (layout, check), = settled.items()
    if layout.placements != 2:
        raise ParseError(source, first, "result rows of one placement without a table header: whether they are "
                                        "out-of-place or in-place is not on the row; paste the table's header lines "
                                        "with the rows", text)
    _in_order(rows, source)
    return layout.header(check)


def _in_order(rows: list[tuple[int, str]], source: str) -> None:
    """One run prints its sizes in order, a sweep of its own per data type and reduction (each from the first
    size again). A size below the one before it that is not the first size is another process's table
    interleaved: a binary built without MPI=1 that mpirun or srun started once per GPU (NVIDIA/nccl-tests#294)."""
    sizes = [(lineno, int(line.split()[0]), line) for lineno, line in rows]
    start = sizes[0][1]
    for (_, before, _), (lineno, size, line) in zip(sizes, sizes[1:]):
        if size < before and size != start:
            raise ParseError(
                source, lineno,
                f"size {size} after {before}, not a new sweep from {start}: rows of several processes' tables "
                "interleaved, each process running its own job (a binary built without MPI=1 started by mpirun "
                "or srun?); rebuild nccl-tests with `make MPI=1`, or import one process's table", line)


__all__ = ["columns", "Layout", "LAYOUTS"]
