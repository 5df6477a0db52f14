"""What every health fact declares (:class:`Fact`) and the two ways a rule writes its verdict."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpubench.check.verdicts import State, Verdict

Static = dict[str, Any]  # a reader's static facts of one GPU (FactsReader.static)
Seen = dict[str, Any]  # what FactsWatch saw on it (FactsWatch.seen)
# (gpu, static, seen, row_throttle, row_pids) -> the fact's verdict; the last two are what the measured rows
# recorded: throttle reasons, and other processes {pid: name} (None: the rows do not know).
Rule = Callable[[int, Static, Seen, Iterable[str], Mapping[int, str] | None], Verdict]


@dataclass(frozen=True)
class Fact:
    """One health fact: its check name and title, the fields it reads with a healthy GPU's values (read once:
    ``static``; polled while the check loads the GPUs: ``poll``; the fake backend's GPUs read these values), and
    its rule. A field a reader cannot read is None, and the rule must then SKIP, never PASS.

    ``fold``: how each polled field's readings add up over the check, ``fold(so far or None, reading) -> so far``
    (a reading it cannot use: None, and the poll did not read it); ``FactsWatch.seen`` gives the rule the result.
    The pids holding the GPU are the watch's own to fold: it tells the check's processes from the others."""

    check: str
    title: str
    static: Mapping[str, Any]
    poll: Mapping[str, Any]
    rule: Rule
    fold: Mapping[str, Callable[[Any, Any], Any]] = field(default_factory=dict)


def verdict(gpu: int, check: str, state: State, text: str, title: str,
            notes: list[str] | None = None) -> Verdict:
    """A fact verdict for ``gpu``."""
    return Verdict(check=check, target=f"gpu{gpu}", state=state, text=text, kind="fact", gpu=gpu,
                   title=title, notes=list(notes or ()))


def skip(gpu: int, check: str, text: str, static: Static, title: str) -> Verdict:
    """SKIP with the reader's reason for ``check`` (``static["why"]``) in brackets, where it gave one."""
    why = (static.get("why") or {}).get(check)
    return verdict(gpu, check, "SKIP", f"{text} ({why})" if why else text, title)
