"""Autotune: the winning NCCL/RCCL configuration per message size (gpubench.suites.autotune.winners), against the
environment's default configuration, one panel per collective and placement.

Configuration names are long (``NCCL_ALGO=Tree,NCCL_PROTO=Simple,NCCL_MAX_NCHANNELS=32``): written at each point
they overlap and leave the axes, so each winner gets a letter at its point and the last panel is the key.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpubench.toolkit.charts import Chart, Run, bytes_axis, color, grid, join, legend, names, note, save
from gpubench.suites.autotune import winners
from gpubench.suites.autotune.knobs import DEFAULT


def _letters():
    yield from string.ascii_uppercase
    for a in string.ascii_uppercase:
        for b in string.ascii_uppercase:
            yield a + b


def autotune(runs: list[Run], out: Path) -> list[Chart]:
    title = "autotune: winning configuration per size"
    present = [r for r in runs if r.has("autotune")]
    if not present:
        return []  # no sweep in these runs: nothing to say
    have = []
    for i, r in enumerate(runs):
        if r.has("autotune"):
            table = winners.table(r.df[r.df["suite"] == "autotune"])
            if len(table):
                have.append((i, r, table))
    if not have:
        return [note("autotune", title, "no ok autotune busbw rows measured under the default configuration")]
    name = names([r for _, r, _ in have])
    panels = list(dict.fromkeys((c, bool(p)) for *_, t in have for c, p in zip(t["collective"], t["inplace"])))
    fig, axes = grid(len(panels) + 1, cols=3, w=5.6, h=4.2)
    letter, fresh = {}, _letters()
    for ax, (coll, inplace) in zip(axes, panels):
        sizes = set()
        for i, r, t in have:
            t = t[(t["collective"] == coll) & (t["inplace"].astype(bool) == inplace)]
            t = t.drop_duplicates("bytes").sort_values("bytes")
            if t.empty:
                continue
            sizes.update(t["bytes"])
            ax.plot(t["bytes"], t["default_busbw"], ls="--", color=color(i), alpha=0.6,
                    label=join(name[id(r)], "default config"))
            ax.plot(t["bytes"], t["winner_busbw"], "-", color=color(i), label=join(name[id(r)], "best config"))
            won = t[t["winner"] != DEFAULT]
            beyond = won[won["beyond_noise"].astype(bool)]
            within = won[~won["beyond_noise"].astype(bool)]
            ax.scatter(beyond["bytes"], beyond["winner_busbw"], s=36, color=color(i), zorder=3,
                       label=join(name[id(r)], "best, beyond noise"))
            ax.scatter(within["bytes"], within["winner_busbw"], s=36, facecolors="none", edgecolors=color(i),
                       zorder=3, label=join(name[id(r)], "best, within noise or noisy"))
            for b, v, w in zip(won["bytes"], won["winner_busbw"], won["winner"]):
                if w not in letter:
                    letter[w] = next(fresh)
                ax.annotate(letter[w], (b, v), textcoords="offset points", xytext=(0, 7), ha="center",
                            fontsize=8, fontweight="bold", color=color(i))
        bytes_axis(ax, sizes)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_ylim(0, ax.get_ylim()[1] * 1.1)  # room for the letters above the highest points
        ax.set_title(f"{coll} ({'in place' if inplace else 'out of place'})")
        ax.grid(True, which="both", alpha=0.3)
        legend(ax, loc="lower right")
    key = axes[-1]
    key.axis("off")
    lines = [f"{code}   {cfg.replace(',', ', ')}" for cfg, code in letter.items()] or ["the default won everywhere"]
    key.text(0.0, 1.0, "best configurations\n\n" + "\n".join(lines), va="top", ha="left", fontsize=8,
             family="monospace", wrap=True, transform=key.transAxes)
    fig.suptitle(title + " (dashed: default; solid: best; letters: the key)")
    return [Chart("autotune", title, save(fig, out, "autotune.png"))]


def kernels(runs: list[Run], out: Path, rate_metric: Callable[[str], Any]) -> list[Chart]:
    """The kernel-config sweep (suite ``autotune-kernels``): per kernel, dtype and shape, the best launch shapes'
    rates as bars, best first, with torch's own kernel as the dashed line they are held against.
    ``rate_metric(kernel)``: the suite's rate metric of a kernel (it owns which one counts)."""
    title = "autotune-kernels: Triton launch shapes against torch"
    suite = "autotune-kernels"
    present = [(i, r) for i, r in enumerate(runs) if r.has(suite)]
    if not present:
        return []
    groups: dict[tuple, list] = {}
    for i, r in present:
        rows = r.ok(suite)
        rows = rows[(rows["stop"] != "derived")]
        for (kernel, dtype, shape), g in rows.groupby(["kernel", "dtype", "shape"], sort=False):
            groups.setdefault((kernel, dtype, shape), []).append((i, r, g[g["metric"] == rate_metric(kernel).name]))
    if not groups:
        return [note(suite, title, "no ok rows of the kernel sweep")]
    name = names([r for _, r in present])
    fig, axes = grid(len(groups), cols=2, w=7.0, h=4.6)
    for ax, ((kernel, dtype, shape), parts) in zip(axes, groups.items()):
        labels, values, colors = [], [], []
        for i, r, g in parts:
            torch_rows = g[g["config"] == "torch"]
            tuned = g[g["config"] != "torch"].sort_values("value", ascending=False).head(SHOWN)
            for cfg, v in zip(tuned["config"], tuned["value"]):
                labels.append(join(name[id(r)], cfg) if len(parts) > 1 else cfg)
                values.append(float(v))
                colors.append(color(i))
            if len(torch_rows):
                ax.axvline(float(torch_rows["value"].iloc[0]), ls="--", color=color(i),
                           label=join(name[id(r)], f"torch {float(torch_rows['value'].iloc[0]):.4g}"))
        y = list(range(len(values)))[::-1]
        ax.barh(y, values, color=colors, alpha=0.8)
        ax.set_yticks(y, labels, fontsize=7)
        for yy, v in zip(y, values):
            ax.annotate(f"{v:.4g}", (v, yy), textcoords="offset points", xytext=(3, 0), va="center", fontsize=6)
        tried = sum(int((g["config"] != "torch").sum()) for *_, g in parts)
        metric = rate_metric(kernel)
        ax.set_xlabel(f"{metric.name} ({metric.unit})")
        ax.set_title(f"{kernel} {dtype} {shape}: best {len(values)} of {tried} launch shapes")
        ax.grid(True, axis="x", alpha=0.3)
        legend(ax, loc="lower right", framealpha=0.95)
    fig.suptitle(title + " (bars: median of each launch shape, best first; dashed: torch)")
    return [Chart(suite, title, save(fig, out, "autotune-kernels.png"))]


SHOWN = 12  # bars per panel: the best launch shapes; the table holds the rest

__all__ = ["autotune", "kernels"]
