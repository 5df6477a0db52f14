"""Charts stay readable whatever they hold: before a figure is saved, tick labels that would overlap are thinned
(every second, third, ... label kept) until none do. A comm sweep from 8 B to 16 GiB labelled every size read
``32M128M512M2G`` on a panel five inches wide."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axis import Axis
    from matplotlib.backend_bases import RendererBase
    from matplotlib.figure import Figure


def overlaps(labels: list[Any], renderer: RendererBase) -> bool:
    """Whether any two of these drawn texts' extents intersect."""
    boxes = [t.get_window_extent(renderer) for t in labels if t.get_visible() and t.get_text()]
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def _shown(axis: Axis, minor: bool) -> list[Any]:
    return [t for t in axis.get_ticklabels(minor=minor) if t.get_visible() and t.get_text()]


def thin_ticks(fig: Figure) -> None:
    """Hide tick labels of ``fig`` until none of one axis overlap: the minor labels first, where they collide
    with the major ones, then every second, third, ... major label (the first of each axis is kept)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # Agg's canvas, which draws the PNGs
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            major, minor = _shown(axis, False), _shown(axis, True)
            if minor and overlaps(major + minor, renderer):
                for t in minor:
                    t.set_visible(False)
            step = 1
            while step < len(major) and overlaps(major[::step], renderer):
                step += 1
            if step > 1:
                for k, t in enumerate(major):
                    t.set_visible(k % step == 0)


__all__ = ["thin_ticks", "overlaps"]
