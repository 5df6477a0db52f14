"""A case's inputs, filled a piece at a time so that a Ctrl-C can end a fill of gigabytes.

Python acts on a signal only between calls, and one torch call that fills a GiB-sized host array runs for
seconds (longer on a loaded machine). While the engine makes a case's inputs it names its stop check here
(:func:`stop_with`); the fills below call it between pieces, and it raises to abandon the case. Outside the
engine (a suite's own tests) there is no check and a fill is just a fill.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:
    import torch

# Elements per piece: 64 MiB of fp32, a fraction of a second to draw on a loaded host (docs/measurements.md,
# 'Wall time'); on a GPU the pieces are queued like one fill and cost a few launches more.
PIECE = 1 << 24

_stop_check: ContextVar[Callable[[], None] | None] = ContextVar("gpubench_fill_stop_check", default=None)


@contextmanager
def stop_with(check: Callable[[], None] | None) -> Iterator[None]:
    """Within the block, fills call ``check`` between pieces (it raises to stop them)."""
    token = _stop_check.set(check)
    try:
        yield
    finally:
        _stop_check.reset(token)


def _in_pieces(t: "torch.Tensor", fill: Callable[["torch.Tensor"], object]) -> "torch.Tensor":
    flat = t.view(-1)  # t is freshly made, hence contiguous
    check = _stop_check.get()
    for i in range(0, flat.numel(), PIECE):
        if check is not None:
            check()
        fill(flat[i : i + PIECE])
    return t


def uniform(shape: int | tuple[int, ...], dtype: torch.dtype, device: str | torch.device,
            low: float = -1.0, high: float = 1.0) -> "torch.Tensor":
    """A new tensor drawn uniformly from [low, high)."""
    import torch  # here, not above: the engine imports this module, and compare/report must not load torch

    return _in_pieces(torch.empty(shape, dtype=dtype, device=device), lambda p: p.uniform_(low, high))


def full(shape: int | tuple[int, ...], value: float, dtype: torch.dtype, device: str | torch.device) -> "torch.Tensor":
    """A new tensor of ``value`` (NaN poison for an output a kernel must overwrite)."""
    import torch

    return _in_pieces(torch.empty(shape, dtype=dtype, device=device), lambda p: p.fill_(value))


__all__ = ["PIECE", "full", "stop_with", "uniform"]
