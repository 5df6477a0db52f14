"""When the engine stops sampling: nvbench's stopping-criterion shape (initialize, add a sample, is finished).

Sampling stops once there are ``min_samples`` samples whose relative spread (CV) is at or under the target
(``"cv"``), at the sample cap (``"max_samples"``), or once the sampling budget is spent with at least a few
samples (``"budget"``). The rule is asked after each batch, which may have added several samples (flushed ones).
"""

from __future__ import annotations

from typing import Literal

from gpubench.timing.stats import cv

Reason = Literal["cv", "budget", "max_samples"]


class StopRule:
    def __init__(self, target_cv: float, min_samples: int, max_samples: int, budget_s: float):
        self.target_cv, self.min_samples, self.max_samples, self.budget_s = target_cv, min_samples, max_samples, budget_s
        self.samples: list[float] = []
        self.reason: Reason | None = None

    def initialize(self) -> None:
        self.samples, self.reason = [], None

    def add(self, sample: float) -> None:
        self.samples.append(sample)

    @property
    def room(self) -> int:
        """Samples left under the cap."""
        return self.max_samples - len(self.samples)

    def is_finished(self, elapsed_s: float) -> bool:
        """Whether to stop, ``elapsed_s`` into sampling; the reason is then in ``reason``."""
        n = len(self.samples)
        if n >= self.min_samples and cv(self.samples) <= self.target_cv:
            self.reason = "cv"
        elif n >= self.max_samples:
            self.reason = "max_samples"
        elif elapsed_s >= self.budget_s and n >= min(3, self.min_samples):
            self.reason = "budget"
        return self.reason is not None


__all__ = ["StopRule", "Reason"]
