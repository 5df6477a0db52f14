"""What code outside :mod:`gpubench.ranks.group` calls on a group of ranks: :class:`RankGroup`, which
:class:`gpubench.ranks.group.Group` satisfies (and the tests' stand-ins, each for the part it plays).

A module of its own: the engine, the agreements and the ending name it without importing the group (which imports
the ending), and a test's stand-in is held to the same surface as the real group.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class RankGroup(Protocol):
    """This process's place among the ranks and the agreements of the control plane: every rank calls each
    agreement the same number of times (:class:`gpubench.ranks.group.Group`)."""

    rank: int
    world_size: int
    trouble: str | None  # set once a control-plane operation failed: a peer is being lost

    def step(self, where: str | None = None) -> None:
        """Mark progress (the watchdog reads it); ``where`` names what this rank is doing now."""

    def max(self, values: Sequence[float]) -> list[float]:
        """Elementwise maximum over ranks."""

    def gather_floats(self, value: float) -> list[float]:
        """Every rank's ``value``, by rank."""

    def gather_objects(self, obj: object) -> list[Any]:
        """Every rank's ``obj`` (anything pickle takes), by rank."""

    def account(self, wait: bool = False, deadline_s: float | None = None) -> tuple[str, str, bool]:
        """Who did not arrive, in words; the run's status that follows; whether a peer is lost at all."""

    def say_ended(self, signal_name: str, deadline_s: float = 1.0) -> None:
        """A last beat: this rank ends on ``signal_name``."""


__all__ = ["RankGroup"]
