"""A fixed count of calls, each timed alone: for work that two or more ranks run in step without agreeing as
they go (the fabric check's node pairs). The engine's stop rule decides each batch's length from the samples so
far; ranks of a pair that each decided alone would post different counts of sends and receives, and agreeing
needs a control plane that a silent node stalls. So, as nccl-tests does: a warm-up of ``warmup`` calls, then
``iters`` calls, each its own sample through the backend's timer."""

from __future__ import annotations

from gpubench.backends.base import Backend, Runnable


def fixed_count(backend: Backend, workload: Runnable, inputs: object, *, warmup: int, iters: int) -> list[float]:
    """Seconds of each of ``iters`` calls of ``workload`` on ``inputs`` after ``warmup`` untimed ones. A call that
    raises (a partner that never answered) ends it: the exception is the caller's."""
    for _ in range(warmup):
        backend.call(workload, inputs)
    backend.synchronize()
    samples = []
    for _ in range(iters):
        timer = backend.timer()
        timer.start()
        backend.call(workload, inputs)
        timer.stop()
        samples.append(timer.elapsed_s())
    return samples


__all__ = ["fixed_count"]
