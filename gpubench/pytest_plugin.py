"""pytest plugin: the ``gpu_benchmark`` fixture times a callable through gpubench's engine.

    def test_matmul(gpu_benchmark):
        a = torch.randn(4096, 4096, device="cuda")
        out = gpu_benchmark(torch.matmul, a, a)     # returns what the callable returns, like pytest-benchmark
        assert gpu_benchmark.median_s < 2e-3

The engine warms up, batches calls so that the device timer's resolution does not matter, and takes samples
until their spread is small (docs/method.md); time comes from device events on a GPU backend, not from the
host clock. Options: ``--gpubench-backend auto|cuda|hip|cpu|fake`` (default auto), ``--gpubench-device N``,
``--gpubench-quick`` (the engine's short settings, as ``gpubench run --quick``).

When pytest-benchmark is active the result also goes into its ``benchmark`` fixture's storage, so
``--benchmark-json``, ``--benchmark-autosave``, ``--benchmark-compare`` and ``pytest-benchmark compare`` work
as for its own benchmarks. Each engine sample becomes one pytest-benchmark round of ``inner`` iterations (the
calls the sample batches), through the fixture's ``_make_stats`` — the one way its Metadata is made and
registered with the session, stable since pytest-benchmark 3. Registered as the entry point
``pytest11: gpubench``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

# Loaded in every pytest session of a machine with gpubench installed: these modules are light (numpy, no torch).
from gpubench.timing import engine
from gpubench.backends import NAMES, Backend, open_backend
from gpubench.timing.stats import summarize
from gpubench.suite import Method, Workload

if TYPE_CHECKING:
    from pytest_benchmark.fixture import BenchmarkFixture


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpubench", "gpubench: time callables with the gpu_benchmark fixture")
    group.addoption("--gpubench-backend", default="auto", choices=NAMES,
                    help="backend of the gpu_benchmark fixture (default: auto)")
    group.addoption("--gpubench-device", type=int, default=0, help="device index (default: 0)")
    group.addoption("--gpubench-quick", action="store_true", help="the engine's short settings (fewer samples)")


class GpuBenchmark:
    """The ``gpu_benchmark`` fixture's value: call it once per test, like pytest-benchmark's ``benchmark``."""

    def __init__(self, backend: Backend, config: engine.EngineConfig, benchmark: BenchmarkFixture | None = None,
                 name: str = ""):
        self.backend = backend
        self.config = config
        self._benchmark = benchmark  # pytest-benchmark's fixture, when that plugin is active
        self.name = name
        self.measurement: Any = None

    def __call__(self, fn, *args, **kwargs):
        """Time ``fn(*args, **kwargs)``; returns its result (of the last call)."""
        last: list[Any] = [None]

        def run(_inputs):
            last[0] = fn(*args, **kwargs)
            return last[0]

        # The callable brings its own inputs: nothing to rotate, so the cache stays warm as in the caller's code.
        self.measure(Workload(run=run, make_inputs=lambda: None, method=Method(cache="warm")))
        return last[0]

    def measure(self, workload: Workload) -> engine.Measurement:
        """Time a :class:`gpubench.suite.Workload` (bytes, flops, a check, rotating inputs); its Measurement."""
        if self.measurement is not None:
            raise RuntimeError("gpu_benchmark can be used once per test")
        try:
            meas = engine.measure(workload, self.backend, self.config)
        finally:
            self.backend.release()
        if not meas.valid:
            chk = meas.check
            raise AssertionError(chk.detail or f"check failed: error {chk.error:.3g} > tolerance {chk.tolerance:.3g}")
        self.measurement = meas
        self._record(meas)
        return meas

    @property
    def samples_s(self) -> list[float]:
        """Per-call seconds, one per sample."""
        return list(self.measurement.samples_s) if self.measurement else []

    @property
    def stats(self) -> dict[str, float]:
        return summarize(self.samples_s)

    @property
    def median_s(self) -> float:
        return self.stats["median"]

    def _record(self, meas: engine.Measurement) -> None:
        bench = self._benchmark
        if bench is None or getattr(bench, "disabled", False):
            return
        # pytest-benchmark's own Metadata, registered with its session: its JSON, storage and compare see a
        # benchmark with one round per engine sample. Metadata.update divides a round by its iterations.
        stats = bench._make_stats(meas.inner)
        for per_call in meas.samples_s:
            stats.update(per_call * meas.inner)
        stats.options["timer"] = f"gpubench ({self.backend.name})"
        bench._mode = "gpu_benchmark(...)"  # marks the fixture used: no "not used" warning, a second use fails
        bench.extra_info.update({
            "gpubench_backend": self.backend.name, "device": self.backend.device_name(),
            "device_index": self.backend.device_index, "inner": meas.inner, "sets": meas.sets, "stop": meas.stop,
            "warmup_s": meas.warmup_s,
        })


@pytest.fixture(scope="session")
def gpubench_backend(request: pytest.FixtureRequest) -> Backend:
    """The backend ``gpu_benchmark`` measures on, opened once per session."""
    return open_backend(request.config.getoption("gpubench_backend"), request.config.getoption("gpubench_device"))


@pytest.fixture
def gpu_benchmark(request: pytest.FixtureRequest, gpubench_backend: Backend) -> GpuBenchmark:
    benchmark = None
    plugins = request.config.pluginmanager
    # pytest-benchmark registers as "benchmark" through its entry point, under its module name with -p
    if plugins.has_plugin("benchmark") or plugins.has_plugin("pytest_benchmark.plugin"):
        benchmark = request.getfixturevalue("benchmark")
    config = engine.QUICK if request.config.getoption("gpubench_quick") else engine.FULL
    return GpuBenchmark(gpubench_backend, config, benchmark, request.node.name)
