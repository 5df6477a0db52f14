"""Collectives: bus bandwidth against message size, one panel per collective, one line per run and engine
(gpubench's torch loop and nccl-tests share the table: suites/comm/table.py), with the link's spec
bandwidth where this module knows it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gpubench.toolkit.charts import (MARKERS, STYLES, Chart, Run, bytes_axis, color, grid, join, legend, note, save,
                                     spread)
from gpubench.toolkit.workloads import spec_peaks as peaks

# Per-direction NVLink bandwidth of one GPU: what busbw approaches within one NVSwitch node. Keyed by the
# gpubench/machine/spec_peaks.py part name; a part missing here gets no line rather than a guess.
LINK_SPECS = {
    "NVIDIA H100 SXM5": (450.0, "NVLink 4: 900 GB/s bidirectional, 450 GB/s per direction"),
    "NVIDIA H200 SXM": (450.0, "NVLink 4: 900 GB/s bidirectional, 450 GB/s per direction"),
}


def link_spec(device: str | None) -> tuple[float, str] | None:
    spec = peaks.lookup(device) if device else None
    return LINK_SPECS.get(spec.gpu) if spec else None


def _series(rows: pd.DataFrame) -> pd.DataFrame:
    """One point per size: in-place where the run has it (the torch engine measures in-place only), the first
    dtype/op measured, so that engines are drawn on the same footing."""
    if "inplace" in rows.columns and rows["inplace"].astype(str).eq("True").any():
        rows = rows[rows["inplace"].astype(str) == "True"]
    first = rows.iloc[0]
    for col in ("dtype", "op"):
        if col in rows.columns:
            rows = rows[rows[col].astype(str) == str(first[col])]
    return rows.drop_duplicates("bytes").sort_values("bytes")


def comm(runs: list[Run], out: Path) -> list[Chart]:
    title = "comm: bus bandwidth vs message size"
    have = [(i, r, r.ok("comm", "busbw")) for i, r in enumerate(runs)]
    have = [(i, r, rows) for i, r, rows in have if len(rows)]
    if not have:
        return [note("comm", title, "no ok comm busbw rows")] if any(r.has("comm") for r in runs) else []
    collectives = list(dict.fromkeys(c for *_, rows in have for c in rows["collective"]))
    fig, axes = grid(len(collectives), cols=3, w=5.4, h=4.0)
    engines_per_run = {id(r): sorted(rows["engine"].astype(str).unique()) if "engine" in rows.columns else ["?"]
                       for _, r, rows in have}
    lines = _line_names(have, engines_per_run)
    for ax, coll in zip(axes, collectives):
        sizes, links, values = set(), {}, []
        for i, r, rows in have:
            rows = rows[rows["collective"] == coll]
            for k, eng in enumerate(engines_per_run[id(r)]):
                sel = rows[rows["engine"].astype(str) == eng] if "engine" in rows.columns else rows
                if sel.empty:
                    continue
                sel = _series(sel)
                sizes.update(sel["bytes"])
                values += [float(v) for v in sel["value"] if v > 0]
                world = sel["world_size"].dropna() if "world_size" in sel.columns else []
                label = join(*lines[(id(r), eng)]) or "busbw"
                label += f" ({int(world.iloc[0])} ranks)" if len(world) else ""
                ax.errorbar(sel["bytes"], sel["value"], yerr=spread(sel), capsize=2, color=color(i),
                            ls=STYLES[k % len(STYLES)], marker=MARKERS[k % len(MARKERS)], ms=4, label=label)
                nodes = sel["nnodes"].dropna() if "nnodes" in sel.columns else []
                single_node = not len(nodes) or int(nodes.max()) <= 1
                dev = sel["device"].dropna() if "device" in sel.columns else []
                spec = link_spec(str(dev.iloc[0]) if len(dev) else r.identity.get("gpu_model"))
                if spec and single_node and (not len(world) or int(world.iloc[0]) > 1):
                    links[spec[0]] = spec[1]
        for bw, text in links.items():
            ax.axhline(bw, color="black", ls="--", lw=1, label=f"spec {bw:.0f} GB/s ({text.split(':')[0]})")
        bytes_axis(ax, sizes)
        ax.set_xlabel("message size (bytes, nccl-tests convention)")
        ax.set_ylabel("busbw (GB/s)")
        lo, hi = min(values, default=0.0), max([*values, *links], default=0.0)
        if lo > 0 and hi / lo > 100:  # small messages or a slow fabric beside a fast one: a linear axis hides them
            ax.set_yscale("log")
        else:
            ax.set_ylim(0, hi * 1.15 if hi > 0 else 1)
        ax.set_title(coll)
        ax.grid(True, which="both", alpha=0.3)
        legend(ax, loc="lower right")
    fig.suptitle(title + " (log x; error bars: interquartile range of the samples)")
    return [Chart("comm", title, save(fig, out, "comm.png"))]


def _line_names(have, engines_per_run) -> dict[tuple[int, str], tuple[str, ...]]:
    """(cluster, engine) where that names each line apart; the run id only where it does not."""
    keys = [(r, e) for _, r, _ in have for e in engines_per_run[id(r)]]
    many_clusters = len({r.cluster for r, _ in keys}) > 1
    many_engines = len({e for _, e in keys}) > 1
    short = [(r.cluster if many_clusters else "", e if many_engines else "") for r, e in keys]
    return {(id(r), e): (r.label if short.count(s) > 1 and len(have) > 1 else s[0], s[1])
            for (r, e), s in zip(keys, short)}


__all__ = ["comm", "link_spec", "LINK_SPECS"]
