"""Diagnostic 5 for the graph per-node cost: gpubench's graph_replay read 1.09-1.10 us/node on an H200 even
when run alone (2026-11-21), while diag_graph4's scenarios and diag_graph3 read 0.84. Which part of a
gpubench process does it? Each scenario in a fresh process; each ends by timing a new 1000-node graph of
``x.add_(1)`` as diag_graph2 does, except ``engine_*``, which time it through gpubench's engine.

    python tests/gpu/diag_graph5.py            # all scenarios
    python tests/gpu/diag_graph5.py SCENARIO   # one, in this process
"""

import subprocess
import sys
import threading
import time

import torch

from diag_graph2 import capture, per_node


def _nvml():
    import pynvml

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)


def _nvml_polling():
    import pynvml

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)

    def poll():
        while True:
            pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
            pynvml.nvmlDeviceGetPowerUsage(h)
            time.sleep(0.05)

    threading.Thread(target=poll, daemon=True).start()


def _imports():
    import gpubench.runner  # noqa: F401 — pandas, pyarrow, rich, gpubench


def _small_graphs(replay: bool):
    x = torch.zeros(1, device="cuda")
    keep = [capture(x, n) for n in (1, 10, 100)]
    for g in keep:
        for _ in range(2000 if replay else 0):
            g.replay()
    torch.cuda.synchronize()
    return keep


def _many_big_graphs():
    x = torch.zeros(1, device="cuda")
    return [capture(x) for _ in range(12)]


def _engine(nodes_first: bool):
    """The suite's own workload through the engine, without the runner (no NVML, no tables)."""
    from gpubench import engine
    from gpubench.backends.gpu import CudaBackend
    from gpubench.suite import Case
    from gpubench.suites.launch import Launch

    backend, suite = CudaBackend(0), Launch()
    order = (1, 10, 100, 1000) if nodes_first else (1000,)
    for nodes in order:
        w = suite.prepare(Case.of(measure="graph_replay", api="torch", nodes=nodes), backend)
        m = engine.measure(w, backend, engine.FULL)
        med = sorted(m.samples_s)[len(m.samples_s) // 2]
        print(f"  engine nodes={nodes}: {med * 1e6 / nodes:.3f} us/node (inner {m.inner}, sets {m.sets})")


SCENARIOS = {
    "fresh": None,
    "after_nvml_init": _nvml,
    "with_nvml_polling": _nvml_polling,
    "after_gpubench_imports": _imports,
    "after_small_graphs_replayed": lambda: _small_graphs(True),
    "after_small_graphs_not_replayed": lambda: _small_graphs(False),
    "after_12_big_graphs_kept": _many_big_graphs,
}
ENGINE = {"engine_1000_alone": False, "engine_all_nodes": True}


def run(name: str) -> None:
    if name in ENGINE:
        print(name)
        _engine(ENGINE[name])
        return
    keep = SCENARIOS[name]() if SCENARIOS[name] else None  # noqa: F841 — whatever it made stays alive
    g = capture(torch.zeros(1, device="cuda"))
    print(f"{name}: {per_node(g):.3f} us/node")


def main() -> None:
    if len(sys.argv) > 1:
        run(sys.argv[1])
        return
    for name in [*SCENARIOS, *ENGINE]:
        out = subprocess.run([sys.executable, __file__, name], capture_output=True, text=True)
        print(out.stdout.strip() or f"{name}: failed: {out.stderr.strip().splitlines()[-1:]}", flush=True)


if __name__ == "__main__":
    main()
