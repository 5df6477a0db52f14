"""Autotune: the winning NCCL/RCCL configuration per message size (gpubench.autotune.winners), against the
environment's default configuration, one panel per collective."""

from __future__ import annotations

from pathlib import Path

from gpubench.report.plotting import Chart, bytes_axis, color, grid, legend, note, save
from gpubench.report.runs import Run, join, names


def autotune(runs: list[Run], out: Path) -> list[Chart]:
    title = "autotune: winning configuration per size"
    present = [r for r in runs if r.has("autotune")]
    if not present:
        return []  # no sweep in these runs: nothing to say
    try:
        from gpubench.autotune import winners
    except ImportError as e:  # the autotune package is optional to the report
        return [note("autotune", title, f"cannot read autotune rows here ({e})")]
    have = []
    for i, r in enumerate(runs):
        if r.has("autotune"):
            table = winners.table(r.df[r.df["suite"] == "autotune"])
            if len(table):
                have.append((i, r, table))
    if not have:
        return [note("autotune", title, "no ok autotune busbw rows measured under the default configuration")]
    name = names([r for _, r, _ in have])
    collectives = list(dict.fromkeys(c for *_, t in have for c in t["collective"]))
    fig, axes = grid(len(collectives), cols=3, w=5.6, h=4.2)
    for ax, coll in zip(axes, collectives):
        sizes = set()
        for i, r, t in have:
            t = t[t["collective"] == coll].drop_duplicates("bytes").sort_values("bytes")
            if t.empty:
                continue
            sizes.update(t["bytes"])
            ax.plot(t["bytes"], t["default_busbw"], ls="--", color=color(i), alpha=0.6,
                    label=join(name[id(r)], "default config"))
            ax.plot(t["bytes"], t["winner_busbw"], "-", color=color(i), label=join(name[id(r)], "winner"))
            beyond = t[t["beyond_noise"]]
            ax.scatter(beyond["bytes"], beyond["winner_busbw"], s=40, color=color(i), zorder=3,
                       label=join(name[id(r)], "winner beyond noise"))
            for b, v, w in zip(t["bytes"], t["winner_busbw"], t["winner"]):
                ax.annotate(str(w), (b, v), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=6,
                            rotation=30)
        bytes_axis(ax, sizes)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_ylim(0, ax.get_ylim()[1] * 1.2)  # room for the winners' names
        ax.set_title(coll)
        ax.grid(True, which="both", alpha=0.3)
        legend(ax, loc="lower right")
    fig.suptitle(title + " (dashed: default; solid: best configuration, named at each size)")
    return [Chart("autotune", title, save(fig, out, "autotune.png"))]


__all__ = ["autotune"]
