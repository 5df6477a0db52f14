"""Charts of the system suites: launch latency, host↔device copy bandwidth, and the GPU↔GPU copy matrix."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpubench.report.plotting import (MARKERS, STYLES, Chart, bytes_axis, color, fmt_bytes, grid, legend, note,
                                      pyplot, save, spread)
from gpubench.report.runs import Run, join, names

_DIRECTIONS = {"h2d": "host → device", "d2h": "device → host", "bidir": "bidirectional (h2d + d2h at once)",
               "d2d": "device → device (same GPU)"}
_MEMORY_COLORS = {"pinned": "tab:blue", "pageable": "tab:orange", "registered": "tab:green", "device": "tab:purple"}


def _launch_label(row) -> str:
    nodes = getattr(row, "nodes", None)
    extra = f", {int(nodes)} nodes" if nodes is not None and nodes == nodes and int(nodes) > 1 else ""
    return f"{row.measure} ({row.api}{extra})"


def launch(runs: list[Run], out: Path) -> list[Chart]:
    title = "launch: latency per measure"
    have = [(i, r, r.ok("launch", "time")) for i, r in enumerate(runs)]
    have = [(i, r, rows) for i, r, rows in have if len(rows)]
    if not have:
        return [note("launch", title, "no ok launch time rows")] if any(r.has("launch") for r in runs) else []
    labels = list(dict.fromkeys(_launch_label(row) for *_, rows in have for row in rows.itertuples(index=False)))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(11, 0.32 * len(labels) * max(1, len(have)) ** 0.5 + 1.6))
    h = 0.8 / len(have)
    for k, (i, r, rows) in enumerate(have):
        rows = rows.assign(_label=[_launch_label(x) for x in rows.itertuples(index=False)])
        rows = rows.drop_duplicates("_label").set_index("_label")
        present = [lab for lab in labels if lab in rows.index]
        ys = [labels.index(lab) + (k - (len(have) - 1) / 2) * h for lab in present]
        sel = rows.loc[present]
        ax.barh(ys, sel["value"], h, xerr=spread(sel), capsize=2, color=color(i), label=r.label)
        if len(have) == 1:
            for y, v in zip(ys, sel["value"]):
                ax.text(v * 1.08, y, f"{v:.3g} µs", va="center", fontsize=7)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("time per launch / call (µs, log scale)")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.set_title(title + " (bars: median, error bars: interquartile range)")
    if len(have) > 1:
        legend(ax, loc="lower right")
    return [Chart("launch", title, save(fig, out, "launch.png"))]


def copy(runs: list[Run], out: Path) -> list[Chart]:
    title = "copy: bandwidth vs size per direction"
    have = [(i, r, r.ok("copy", "bandwidth")) for i, r in enumerate(runs)]
    have = [(i, r, rows[rows["direction"] != "peer"]) for i, r, rows in have if len(rows)]
    have = [(i, r, rows) for i, r, rows in have if len(rows)]
    if not have:
        if any(r.has("copy") and not len(r.ok("copy", "bandwidth")) for r in runs):
            return [note("copy", title, "no ok host↔device copy rows (the cpu backend skips them: no device memory)")]
        return []
    directions = [d for d in _DIRECTIONS if any((rows["direction"] == d).any() for *_, rows in have)]
    fig, axes = grid(len(directions), cols=2, w=6.4, h=4.2)
    for ax, d in zip(axes, directions):
        sizes = set()
        here = [(i, r, rows[rows["direction"] == d]) for i, r, rows in have if (rows["direction"] == d).any()]
        name = names([r for _, r, _ in here])
        for i, r, rows in here:
            for k, mem in enumerate(sorted(rows["memory"].astype(str).unique())):
                sel = rows[rows["memory"] == mem].sort_values("copy_bytes")
                sizes.update(sel["copy_bytes"])
                # One run: a colour per memory kind, pinned vs pageable being the point of the chart.
                c = color(i) if len(here) > 1 else _MEMORY_COLORS.get(mem, "tab:gray")
                ax.errorbar(sel["copy_bytes"], sel["value"], yerr=spread(sel), capsize=2, color=c,
                            ls=STYLES[k % len(STYLES)], marker=MARKERS[k % len(MARKERS)], ms=4,
                            label=join(name[id(r)], mem))
        bytes_axis(ax, sizes)
        ax.set_xlabel("copy size (bytes, counted once)")
        ax.set_ylabel("bandwidth (GB/s)")
        ax.set_ylim(bottom=0)
        ax.set_title(_DIRECTIONS[d])
        ax.grid(True, which="both", alpha=0.3)
        legend(ax, loc="upper left")
    fig.suptitle(title + ": pinned vs pageable vs registered host memory (error bars: interquartile range)")
    return [Chart("copy", title, save(fig, out, "copy.png"))]


def peer(runs: list[Run], out: Path) -> list[Chart]:
    title = "copy: GPU ↔ GPU bandwidth matrix"
    have = []
    for i, r in enumerate(runs):
        rows = r.ok("copy", "bandwidth")
        rows = rows[rows["direction"].isin(["peer", "d2d"])] if len(rows) else rows
        if len(rows) and (rows["direction"] == "peer").any():
            have.append((r, rows[rows["copy_bytes"] == rows.loc[rows["direction"] == "peer", "copy_bytes"].max()]))
    if not have:
        return []
    fig, axes = grid(len(have), cols=2, w=5.6, h=4.6)
    for ax, (r, rows) in zip(axes, have):
        gpus = sorted(set(rows["src"]) | set(rows["dst"]), key=lambda g: (len(g), g))
        m = np.full((len(gpus), len(gpus)), np.nan)
        for row in rows.itertuples(index=False):
            m[gpus.index(row.src), gpus.index(row.dst)] = row.value
        # The diagonal (d2d, within one GPU's memory) is several times any link: colouring it would wash out
        # the peer cells, so it is printed on grey and the colour scale is the peers' alone.
        off = ~np.eye(len(gpus), dtype=bool)
        peers = np.where(off, m, np.nan)
        im = ax.imshow(peers, cmap="viridis", vmin=0, vmax=np.nanmax(peers))
        ax.imshow(np.where(off, np.nan, 1.0), cmap="Greys", vmin=0, vmax=5)
        for (a, b), v in np.ndenumerate(m):
            dark = off[a, b] and v < np.nanmax(peers) * 0.6
            text = "—" if v != v else (f"{v:.0f}" if off[a, b] else f"d2d\n{v:.0f}")
            ax.text(b, a, text, ha="center", va="center", color="white" if dark else "black", fontsize=9)
        ax.set_xticks(range(len(gpus)), gpus)
        ax.set_yticks(range(len(gpus)), gpus)
        ax.set_xlabel("destination")
        ax.set_ylabel("source")
        size = fmt_bytes(float(rows["copy_bytes"].iloc[0]))
        ax.set_title(f"{r.label}: {size}iB copies, GB/s (— : not measured)", fontsize=9)
        fig.colorbar(im, ax=ax, label="GB/s")
    return [Chart("copy", title, save(fig, out, "copy-peer.png"))]


__all__ = ["launch", "copy", "peer"]
