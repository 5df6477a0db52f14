"""The ranks of a group agree on whether a step failed anywhere, and why.

A step that raises on one rank (out of memory on one GPU, a case that does not fit, a graph that cannot be
captured) must be every rank's failure: a rank that went on would wait in a collective the failed one never
joins. Each rank says how its step ended (and a figure, e.g. its time for one call); every rank learns every
outcome, by rank, over the group's control channel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from gpubench.errors import first_line
from gpubench.suite import Skip

if TYPE_CHECKING:
    from gpubench.ranks.rank_group import RankGroup

T = TypeVar("T")


@dataclass(frozen=True)
class Failure:
    """One rank's failed step."""

    rank: int
    skipped: bool  # it raised Skip: the case cannot run there
    line: str  # "ErrorType: first line of the message"

    def error(self) -> Exception:
        """The failure as this rank raises it: a Skip stays a Skip (with its own words), else a RuntimeError
        naming the rank."""
        return Skip(self.line.split(": ", 1)[-1]) if self.skipped else RuntimeError(f"rank {self.rank}: {self.line}")


def outcomes(group: RankGroup, error: BaseException | None, value: float = 0.0) -> tuple[list[Failure], float]:
    """Every rank's failure of this step, by rank (empty where none failed), and the largest ``value``."""
    mine = None if error is None else (isinstance(error, Skip), first_line(error))
    seen = group.gather_objects((mine, float(value)))
    return [Failure(r, *o) for r, (o, _) in enumerate(seen) if o is not None], max(v for _, v in seen)


def shared(group: RankGroup, error: BaseException | None, value: float = 0.0) -> float:
    """Raise on every rank if the step failed on any: the lowest failed rank's error (this rank's own exception
    where that is this rank). Else the largest ``value`` over the ranks."""
    failed, top = outcomes(group, error, value)
    if failed:
        if error is not None and failed[0].rank == group.rank:
            raise error
        raise failed[0].error()
    return top


def together(group: RankGroup | None, make: Callable[[], T]) -> T:
    """``make()`` on every rank (or alone, without a group); if it raised anywhere, a RuntimeError naming every
    rank where it did is raised on every rank."""
    if group is None:
        return make()
    value, error = None, None
    try:
        value = make()
    except Exception as e:  # noqa: BLE001 — reported to every rank just below
        error = e
    failed, _ = outcomes(group, error)
    if failed:
        raise RuntimeError("; ".join(f"rank {f.rank}: {f.line}" for f in failed)) from error
    return value


__all__ = ["Failure", "outcomes", "shared", "together"]
