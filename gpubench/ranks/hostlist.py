"""SLURM host lists (``gpu[01-04,7],rack[0-1]_blade[0-2]``) expanded the way SLURM expands them.

``scontrol show hostnames`` is SLURM's own reading and is asked first where it exists (a login or compute node with
SLURM's client); elsewhere (a container without it, a test) the grammar of SLURM's documentation, written here:

- names are separated by commas (or white space) outside brackets;
- a bracket holds ranges ``N`` or ``N-M`` (N ≤ M) separated by commas; a range is as wide as its first number
  written (``[01-10]``: 01 … 10; ``[8-10]``: 8, 9, 10);
- text after a bracket is a suffix, and a name may hold several brackets: their product, the leftmost outermost
  (``a[1-2]b[3-4]``: a1b3, a1b4, a2b3, a2b4).
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess

from gpubench.errors import UsageError

MAX_HOSTS = 1 << 16  # SLURM's own limit on one range (MAX_RANGE); a list longer than this is a typo
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _bad(text: str, why: str) -> UsageError:
    return UsageError(f"cannot read the SLURM host list {text!r}: {why}")


def _split(text: str) -> list[str]:
    """The comma- or space-separated names of ``text``, brackets kept whole."""
    names, depth, current = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
            if depth > 1:
                raise _bad(text, "a bracket inside a bracket")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise _bad(text, "a ']' without its '['")
        if depth == 0 and (ch == "," or ch.isspace()):
            names.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth:
        raise _bad(text, "a '[' without its ']'")
    names.append("".join(current))
    return [n for n in names if n]


def _numbers(text: str, inside: str) -> list[str]:
    """The numbers one bracket's ranges name, each as wide as its range's first number."""
    out: list[str] = []
    for part in inside.split(","):
        m = _RANGE.match(part.strip())
        if not m:
            raise _bad(text, f"[{inside}] holds {part.strip()!r}, not a number or a range N-M")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo):
            raise _bad(text, f"the range {part.strip()} runs backwards")
        if int(hi) - int(lo) + len(out) >= MAX_HOSTS:
            raise _bad(text, f"more than {MAX_HOSTS} hosts")
        out += [str(n).zfill(len(lo)) for n in range(int(lo), int(hi) + 1)]
    return out


def _expand_name(text: str, name: str) -> list[str]:
    pieces = re.split(r"\[([^\]]*)\]", name)  # text, bracket, text, bracket, …, text
    choices = [[p] if k % 2 == 0 else _numbers(text, p) for k, p in enumerate(pieces)]
    total = 1
    for c in choices:
        total *= len(c)
    if total > MAX_HOSTS:
        raise _bad(text, f"more than {MAX_HOSTS} hosts")
    return ["".join(parts) for parts in itertools.product(*choices)]


def parse(text: str) -> list[str]:
    """The host names of a SLURM host list, in SLURM's order (duplicates kept, as SLURM keeps them)."""
    hosts: list[str] = []
    for name in _split(text.strip()):
        hosts += _expand_name(text, name)
        if len(hosts) > MAX_HOSTS:
            raise _bad(text, f"more than {MAX_HOSTS} hosts")
    return hosts


def expand(text: str, *, scontrol: bool = True) -> list[str]:
    """The host names of ``text``: ``scontrol show hostnames`` where it is on PATH and answers, else :func:`parse`."""
    exe = shutil.which("scontrol") if scontrol else None
    if exe:
        try:
            out = subprocess.run([exe, "show", "hostnames", text], capture_output=True, text=True, timeout=20)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.split()
        except (OSError, subprocess.SubprocessError):
            pass  # SLURM's client is there but does not answer: the same grammar, read here
    return parse(text)


def first(text: str) -> str:
    """The first host of a SLURM host list (where SLURM starts rank 0 of a step)."""
    try:
        hosts = parse(text)  # the first host needs no call to scontrol: no range can change it
    except UsageError as e:
        raise UsageError(f"{e}: set MASTER_ADDR to the first node") from None
    if not hosts:
        raise UsageError(f"the SLURM host list {text!r} is empty: set MASTER_ADDR to the first node")
    return hosts[0]


__all__ = ["parse", "expand", "first", "MAX_HOSTS"]
