"""``launch``: the launch-latency numbers people confuse, each its own case (``measure`` column).

- ``host_launch``: CPU time to enqueue one kernel, the queue drained first — through CuPy ``RawKernel``
  (``api = raw``, no framework), Triton's launcher (``triton``) and a tiny torch op (``torch``);
- ``gpu_gap``: GPU time per kernel when the queue is already full (the stream is held until a long batch
  is enqueued, then events time it);
- ``graph_replay`` / ``graph_launch``: one replay of a captured graph of ``nodes`` tiny kernels, timed on the
  GPU (queue full) and on the host; ``summarize`` fits per-node and fixed cost over nodes = 1…1000;
- ``sync_roundtrip``: launch + ``synchronize`` of one tiny kernel; ``event_roundtrip``: record an event and
  poll ``query`` until it completes;
- ``chain``: a step of ``kernels`` tiny kernels, eager and as one graph replay, back to back as a training
  loop issues them; ``summarize`` reports the graph-vs-eager speedup.

Every kernel is the same tiny one: add 1 to a single fp32 value, so that each measured call can be checked
(the value must rise by exactly the number of kernels). GPUs only: on the CPU there is no launch to time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gpubench.toolkit import TIME, Backend, Case, Check, Derived, GridContext, Method, Metric, Skip, Suite, Workload
from gpubench.toolkit.charts import Chart, Run, color, legend, note, pyplot, save, spread
from gpubench.toolkit.workloads import paired_draws, propagate

APIS = ("raw", "triton", "torch")
GRAPH_NODES = (1, 10, 100, 1000)
CHAIN_KERNELS = 100
SPEEDUP = Metric("speedup", "x", "higher")
# Host-timed: what the CPU spends. The rest is device-timed: what the GPU spends.
_HOST_TIMED = ("host_launch", "graph_launch", "sync_roundtrip", "event_roundtrip")
# timing_method column: compare reads "host ..." as a figure whose level moves between processes.
HOST_CLOCK, DEVICE_EVENTS = "host clock", "device events"

_RAW_SOURCE = r'extern "C" __global__ void gpubench_inc(float* x) { x[0] += 1.0f; }'


def _raw_kernel():
    try:
        import cupy
    except ImportError as e:
        raise Skip(f"cupy is not installed ({e}); pip install cupy-cuda12x (or the build for your CUDA)") from e
    kernel = cupy.RawKernel(_RAW_SOURCE, "gpubench_inc")
    views: dict[int, Any] = {}  # torch tensor -> CuPy view, made once: the conversion is not the launch

    def launch(x: torch.Tensor) -> None:
        view = views.get(x.data_ptr())
        if view is None:
            view = views[x.data_ptr()] = cupy.asarray(x)
        kernel((1,), (1,), (view,))

    return launch


def _triton_kernel():
    try:
        import triton
        import triton.language as tl
    except ImportError as e:
        raise Skip(f"triton is not installed ({e})") from e

    @triton.jit
    def _inc(x):
        tl.store(x, tl.load(x) + 1.0)

    def launch(x: torch.Tensor) -> None:
        _inc[(1,)](x)

    return launch


def _torch_kernel():
    return lambda x: x.add_(1.0)


_LAUNCHERS = {"raw": _raw_kernel, "triton": _triton_kernel, "torch": _torch_kernel}


@dataclass
class Counter:
    """One input set: a single fp32 value on the device, the value it started from, and (for graph
    cases) the graph captured on it."""

    x: torch.Tensor
    start: float = 0.0
    graph: Any = None


def _check(per_call: int):
    def check(c: Counter, _out: object) -> Check:
        moved = float(c.x.item()) - c.start
        err = abs(moved - per_call)
        return Check(err == 0.0, err, 0.0, "" if err == 0 else f"value moved by {moved:g}, expected {per_call}")

    return check


# One graph per node count per process, shared by graph_replay, graph_launch and chain_graph and kept alive: a graph's
# per-node cost depends on the graph nodes the process made before it (docs/measurements.md, launch).
_GRAPHS: dict[tuple[str, str, int], Counter] = {}


def _graph_counter(api: str, fn, nodes: int, device: str) -> Counter:
    # The grid's larger graphs first, whatever the process measures: a run filtered to one node count, or a worker
    # measuring one case, is then in the state the whole sweep's process is in at that case (largest first).
    for n in sorted({g for g in GRAPH_NODES if g > nodes} | {nodes}, reverse=True):
        key = (device, api, n)
        if key not in _GRAPHS:
            c = Counter(torch.zeros(1, device=device))
            c.graph = _capture(fn, c.x, n)
            _GRAPHS[key] = c
    c = _GRAPHS[(device, api, nodes)]
    # A fresh random start for every input set (the graph reads x's memory, so it is refilled in place).
    c.x.copy_(_random_start(device))
    c.start = float(c.x.item())
    return c


def _random_start(device: str) -> torch.Tensor:
    # Whole numbers, so that fp32 adds of 1.0 stay exact however many kernels one check runs.
    return torch.randint(-(1 << 20), 1 << 20, (1,), device=device).float()


def _capture(fn, x: torch.Tensor, nodes: int):
    """``nodes`` calls of fn(x) captured into one CUDA/HIP graph; warm-up on a side stream, as torch asks."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for _ in range(nodes):
                fn(x)
    except Exception as e:  # HIP graph capture gaps: record why, don't crash (issue text)
        raise Skip(f"unsupported: graph capture failed: {type(e).__name__}: {e}") from e
    return graph


class Launch(Suite):
    name = "launch"
    version = 1
    backends = frozenset({"cuda", "hip", "cpu", "fake"})
    metrics = (TIME,)
    description = "host launch cost, GPU-side gap, graph replay (fitted), sync round trips, graph vs eager"
    params = ("measure", "api", "nodes")

    chart_order = 40

    @classmethod
    def charts(cls, runs, out):
        return _chart(runs, out)

    def cases(self, ctx: GridContext):
        # Graphs first, largest first: the 1000-node graph, which decides the per-node fit, is captured before
        # anything else in the process has loaded a module or captured a graph (see _GRAPHS).
        for nodes in sorted(GRAPH_NODES, reverse=True):
            yield Case.of(measure="graph_replay", api="torch", nodes=nodes)
        for nodes in sorted(GRAPH_NODES, reverse=True):
            yield Case.of(measure="graph_launch", api="torch", nodes=nodes)
        for api in APIS:
            yield Case.of(measure="host_launch", api=api, nodes=1)
        for api in APIS:
            yield Case.of(measure="gpu_gap", api=api, nodes=1)
        yield Case.of(measure="sync_roundtrip", api="torch", nodes=1)
        yield Case.of(measure="event_roundtrip", api="torch", nodes=1)
        for mode in ("chain_eager", "chain_graph"):
            yield Case.of(measure=mode, api="torch", nodes=CHAIN_KERNELS)

    def prepare(self, case: Case, backend: Backend, ctx: GridContext | None = None) -> Workload:
        if backend.name == "cpu":
            raise Skip("no GPU: kernel launch latency has no meaning on the CPU backend")
        measure, api, nodes = case["measure"], case["api"], case["nodes"]
        device, on_gpu = backend.torch_device, backend.name in ("cuda", "hip")
        if api != "torch" and not on_gpu:
            raise Skip(f"{api} kernels need a GPU (backend {backend.name!r} runs torch on CPU tensors)")
        fn = _LAUNCHERS[api]()
        graphed = measure in ("graph_replay", "graph_launch", "chain_graph")

        def make_inputs() -> Counter:
            if graphed and on_gpu:
                return _graph_counter(api, fn, nodes, device)
            # A fresh random start: an increment that did not happen cannot hide behind a constant.
            c = Counter(_random_start(device))
            c.start = float(c.x.item())
            return c

        if measure in ("host_launch", "gpu_gap"):
            run, per_call = (lambda c: fn(c.x)), 1
        elif graphed and on_gpu:
            run, per_call = (lambda c: c.graph.replay()), nodes
        elif graphed or measure == "chain_eager":
            # Eager chain; also the fake backend's stand-in for a replay (same calls, CPU tensors).
            run, per_call = (lambda c: [fn(c.x) for _ in range(nodes)]), nodes
        elif measure == "sync_roundtrip":
            run, per_call = (lambda c: (fn(c.x), backend.synchronize())), 1
        elif measure == "event_roundtrip":
            run, per_call = _event_roundtrip(fn, on_gpu), 1
        else:
            raise ValueError(f"unknown measure {measure!r}")

        return Workload(
            run=run,
            make_inputs=make_inputs,
            check=_check(per_call),
            extra={"kernels_per_call": per_call,
                   "timing_method": HOST_CLOCK if measure in _HOST_TIMED else DEVICE_EVENTS},
            method=Method(
                cache="warm",  # one float: there is nothing to rotate
                timing="host" if measure in _HOST_TIMED else "device",
                hold=measure in ("gpu_gap", "graph_replay"),
                paced=measure == "chain_eager",  # the GPU waits on the host issuing the chain: its time is the host's
            ),
        )

    def per_process(self, case: Case) -> bool:
        # Figures each process draws a level of (the host's, the host-bound eager chain, the GPU gaps, the one-node
        # replay): a run of one process is one draw (results/reference/h200/gpu-state-20261129/, per-process-20261129/).
        return case["measure"] in (*_HOST_TIMED, "chain_eager", "gpu_gap") or (
            case["measure"] == "graph_replay" and case["nodes"] == 1)

    def summarize(self, rows: list[dict[str, Any]]) -> list[Derived]:
        """The fixed and per-node cost of a graph replay (a line fit over nodes) and the chain's graph-vs-eager
        speedup; each with samples propagated from its parents' (gpubench.timing.stats.propagate), so that it is
        judged with their noise, and timed as its parents were (host clock if any of them was)."""
        out: list[Derived] = []
        parents = {(r["measure"], r["nodes"]): r for r in rows
                   if r["metric"] == "time" and r["status"] == "ok" and r.get("stop") != "derived"}
        for measure, what in (("graph_replay", "GPU"), ("graph_launch", "host")):
            pts = [(n, parents[(measure, n)]) for n in GRAPH_NODES if (measure, n) in parents]
            if len(pts) >= 2:
                nodes = [n for n, _ in pts]
                fixed, per_node = fit_line([(n, r["value"]) for n, r in pts])
                samples = [r.get("samples") or [] for _, r in pts]
                nodes_text = ",".join(str(n) for n in nodes)
                extra = _timing([r for _, r in pts])
                ids = tuple(r.get("case", "") for _, r in pts)
                # One fit per paired draw (one sample of every node count): intercept and slope samples.
                fits = [fit_line(list(zip(nodes, ys))) for ys in paired_draws(samples)]
                out.append(Derived(Case.of(measure=f"{measure}_fixed", api="torch", nodes=0), TIME, fixed,
                                   f"{what} time per replay = fixed + nodes × per_node, least squares over "
                                   f"nodes={nodes_text}", tuple(f[0] for f in fits), extra, ids))
                out.append(Derived(Case.of(measure=f"{measure}_per_node", api="torch", nodes=0), TIME, per_node,
                                   f"slope of the same fit over nodes={nodes_text}", tuple(f[1] for f in fits), extra,
                                   ids))
        eager, graph = parents.get(("chain_eager", CHAIN_KERNELS)), parents.get(("chain_graph", CHAIN_KERNELS))
        if eager and graph and eager["value"] and graph["value"]:
            out.append(Derived(Case.of(measure="chain_speedup", api="torch", nodes=CHAIN_KERNELS), SPEEDUP,
                               eager["value"] / graph["value"],
                               f"chain of {CHAIN_KERNELS} kernels: eager time / graph replay time",
                               tuple(propagate(lambda e, g: e / g, [eager.get("samples") or [],
                                                                    graph.get("samples") or []])),
                               _timing([eager, graph]), (eager.get("case", ""), graph.get("case", ""))))
        return out


def _timing(parents: list[dict[str, Any]]) -> tuple[tuple[str, Any], ...]:
    """A derived row's timing_method: the host clock's if any parent was host-timed or host-bound (its level
    then moves between processes, and so does the derived figure's)."""
    host = any(str(r.get("timing_method", "")).startswith("host") or r.get("host_bound") is True for r in parents)
    return (("timing_method", HOST_CLOCK if host else DEVICE_EVENTS),)


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares intercept and slope of y over x."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - slope * mx, slope


def _event_roundtrip(fn, on_gpu: bool):
    def run(c: Counter) -> None:
        fn(c.x)
        if on_gpu:
            ev = torch.cuda.Event()
            ev.record()
            while not ev.query():
                pass

    return run


# --- the report's charts --------------------------------------------------------------------------------------------
def _launch_label(measure: str, api: str, nodes: float | None) -> str:
    extra = f", {int(nodes)} nodes" if nodes is not None and nodes == nodes and int(nodes) > 1 else ""
    return f"{measure} ({api}{extra})"


def _labels(rows: Any) -> list[str]:
    """Each row's label, from its three columns alone (itertuples builds all of the table's ~80 per call)."""
    nodes = rows["nodes"] if "nodes" in rows else [None] * len(rows)
    return [_launch_label(*x) for x in zip(rows["measure"], rows["api"], nodes)]


def _chart(runs: list[Run], out: Path) -> list[Chart]:
    title = "launch: latency per measure"
    have = [(i, r, r.ok("launch", "time")) for i, r in enumerate(runs)]
    have = [(i, r, rows) for i, r, rows in have if len(rows)]
    if not have:
        return [note("launch", title, "no ok launch time rows")] if any(r.has("launch") for r in runs) else []
    labels = list(dict.fromkeys(lab for *_, rows in have for lab in _labels(rows)))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(11, 0.32 * len(labels) * max(1, len(have)) ** 0.5 + 1.6))
    h = 0.8 / len(have)
    for k, (i, r, rows) in enumerate(have):
        rows = rows.assign(_label=_labels(rows))
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
