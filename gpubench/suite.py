"""The contract between a suite and the engine.

A suite only *declares*, like a ``struct testColl`` in nccl-tests: its metrics, its grid of cases, and for
each case a :class:`Workload` that says what to run, what it moves and computes, and how to check it, and a
:class:`Method` that says how it wants it timed. The engine (:mod:`gpubench.timing.engine`, with its batch strategies,
stop rule and graph mode) is the only code that reads a clock; it warms up, rotates inputs past the cache,
repeats until the spread is small, and derives the metrics below from bytes and flops.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from gpubench.backends.base import Backend
from gpubench.errors import UsageError
from gpubench.options import Option, Options

if TYPE_CHECKING:
    from pathlib import Path

# --- the other ways into and out of a suite's table ---------------------------------------------------------
# Besides the case loop: an Engine (``run --engine NAME``, or a suite's ``driver``), an Importer (``gpubench import``)
# and an Exporter (``export --format``), each declared by a suite and found by name (gpubench.declared.way), never by
# suite (docs/writing-a-suite.md; tests/test_ways.py holds each built-in one reachable).


@dataclass(frozen=True)
class Engine:
    """``run(request)`` (a gpubench.run.request.RunRequest; its exit status) measures the suite's grid its own way."""

    name: str
    run: Callable[[Any], int]
    # Options of the suite that only this engine reads (their ``dest``): given to another engine, a usage error.
    own_options: tuple[str, ...] = ()
    # For a driver: why it cannot share a run with other suites, ``--devices`` or ``--engine`` (the usage error).
    alone: str = ""


@dataclass(frozen=True)
class Importer:
    """``read(paths, tool=..., out=..., cluster=..., collective=..., argv=..., ranks=...)`` writes a run directory
    of the suite's table from ``paths`` and returns what it read, for the command to print: ``runs`` (each with
    ``rows``, ``source``, ``line``, ``tool``, ...), ``failed``, ``warnings``, ``invalid`` and ``run_dir`` (the comm
    suite's importer is the model)."""

    name: str
    read: Callable[..., Any]


@dataclass(frozen=True)
class Exporter:
    """``write(table, meta)``: the text of a run's rows (a results table with its run.json ``meta``) in this
    format, and one line saying what it holds."""

    name: str
    write: Callable[[Any, dict[str, Any]], tuple[str, str]]
    # What the command says where the run has none of the suite's rows.
    needs: str = ""


Better = Literal["higher", "lower"]

# Units the engine converts a time into; a suite picks one per time metric.
TIME_SCALE = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}


@dataclass(frozen=True)
class Metric:
    """One number a suite reports per case. ``better`` tells compare which direction is a regression."""

    name: str
    unit: str
    better: Better


# The metrics the engine derives by itself from a workload's declared bytes and flops.
TIME = Metric("time", "us", "lower")
BANDWIDTH = Metric("bandwidth", "GB/s", "higher")  # bytes / time, GB = 1e9
THROUGHPUT = Metric("throughput", "TFLOP/s", "higher")  # flops / time, TFLOP = 1e12


class Skip(Exception):
    """Raised by ``prepare`` when a case cannot run here (dtype unsupported, library missing).

    The run records a ``skipped`` row with the reason instead of a number that means nothing.
    """


@dataclass(frozen=True)
class Case:
    """One point of a suite's grid. Its parameters become columns of the result table."""

    params: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, **params: Any) -> Case:
        return cls(tuple(params.items()))

    @property
    def id(self) -> str:
        """Stable id, the join key of compare: ``op=copy,dtype=fp32,...`` in declaration order."""
        return ",".join(f"{k}={v}" for k, v in self.params)

    def __getitem__(self, key: str) -> Any:
        return dict(self.params)[key]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.params)


@dataclass(frozen=True)
class Check:
    """Outcome of comparing a workload's output with a reference on fresh random inputs."""

    ok: bool
    error: float  # the measured error, in the suite's own definition (e.g. relative norm error)
    tolerance: float
    detail: str = ""


@dataclass(frozen=True)
class Graph:
    """Graph mode (``Method.graph``): the timed calls captured in one CUDA/HIP graph and replayed, as nccl-tests'
    ``-G`` does, taking the host's issue and launch cost out; eager where the backend cannot capture or the
    capture fails (the row says why). docs/method.md says how the engine does it."""

    calls: int = 20  # calls captured per replay (nccl-tests -G captures its -n, default 20)
    # A call at least ``long_call_s`` long (timed once, eager, with the host's clock) gets enough calls to last
    # ``span_s`` instead: launch cost no longer matters there, and a sample of replays stays a few ms long.
    long_call_s: float = 1e-3
    span_s: float = 4e-3
    sample_s: float = 0.0  # the shortest sample of replays, in place of Method.min_sample_s
    # Restores an input set whose input the calls changed in place (an in-place reduction), returning it: before
    # a set is captured, and before the check's own call. None: the calls change no input.
    refill: Callable[[Any], Any] | None = None
    # Whether the replay's output can be checked as it is (calling again on its own output gives the same
    # result: out of place, broadcast, all_gather); else the check refills the set and makes one call outside.
    reread: bool = True


@dataclass(frozen=True)
class Method:
    """*How* the engine times a workload: the cache policy, the clock, the shape of a batch and of the warm-up.

    A suite picks these per case; the engine chooses its batch strategy and stop rule from them once
    (docs/method.md). The defaults are the engine's plain method: rotating input sets, device timing, batches of
    back-to-back calls. ``context`` and ``before_batch`` are here, not on :class:`Workload`, because neither
    changes what one ``run`` does or computes: they set up the conditions it is timed in (around the whole
    measurement, before each batch).
    """

    # "rotate": cycle through enough input sets to span the cache; "flush": overwrite the cache before each
    # single-call sample; "warm": neither (the suite wants cache-resident numbers).
    cache: Literal["rotate", "flush", "warm"] = "rotate"
    # "device": device events around the batch (what the GPU spent). "host": the host's clock around the
    # enqueue alone, the queue drained before it (what the CPU spent issuing the calls).
    timing: Literal["device", "host"] = "device"
    # Hold the stream (a sleep kernel) until the whole batch is enqueued, so that device timing sees a full
    # queue and no launch gaps (nvbandwidth's method). Needs a backend that can hold.
    hold: bool = False
    # Operations one ``run`` performs (a captured graph of several collectives): per-call figures divide by it.
    calls: int = 1
    # Changes to the engine's configuration for this workload (EngineConfig field -> value), over the run's own
    # (--quick or not): a suite whose cases are many and short asks for fewer samples and a shorter warm-up
    # (comm: nccl-tests' per-size iteration count, the stop rule extending only noisy rows).
    sampling: Mapping[str, Any] | None = None
    # The least warm-up this workload needs, in seconds, in every mode (it lengthens the engine's max_warmup_s): a
    # large GEMM pulls the SM clock down under the power limit only after a few hundred ms, reading the boost's before.
    min_warmup_s: float = 0.0
    # The shortest sample this workload wants, over the engine's own (a collective's samples must be long enough
    # that the ranks' few-µs start skew vanishes in them).
    min_sample_s: float = 0.0
    # The period of the power control loop this workload runs into, in seconds (0: none): the clock, and so the rate,
    # swings with it (docs/measurements.md, 'gemm'). Once warm, each sample is a batch of whole periods; three suffice.
    period_s: float = 0.0
    # Take the host's pace (gpubench.machine.host_pace) before each batch of a device-timed workload whose time is the
    # host's (an eager chain); host-timed batches always carry it. The pace moves within a process, so it is taken at
    # the batch (results/reference/h200/chain-pace-20261129/).
    paced: bool = False
    # A context-manager factory the runner enters around the measurement (not the preparation), e.g. to bind
    # the host thread to the GPU's NUMA node while pageable copies are timed; it is exited even on failure.
    context: Callable[[], AbstractContextManager] | None = None
    # Called untimed right before each timed batch (comm: a small collective that lines the ranks' streams up,
    # so that no rank's batch starts by waiting for another rank to arrive).
    before_batch: Callable[[], None] | None = None
    # Capture the timed calls in a graph where the backend can (None: eager, the default).
    graph: Graph | None = None


@dataclass
class Workload:
    """*What* the engine times for one case; ``method`` says how.

    ``make_inputs`` returns a fresh, random input set (outputs poisoned) and is called as many times as the
    engine needs: once for the correctness check and once per rotating set. ``run(inputs)`` does the
    operation once on one set and returns its output. ``check(inputs, output)`` compares the output with
    a reference computed from the same inputs.
    """

    run: Callable[[Any], Any]
    make_inputs: Callable[[], Any]
    bytes: int = 0  # bytes moved by one run, as the suite counts them (its docs say how)
    flops: int = 0  # floating-point operations of one run
    check: Callable[[Any, Any], Check] | None = None
    # Bytes of one input set, for sizing the rotation past the cache; None means ``bytes``.
    footprint: int | None = None
    # Suite-specific metrics from one per-call time in seconds (e.g. busbw from algbw); merged over the
    # engine's own time/bandwidth/throughput.
    derive: Callable[[float], Mapping[str, float]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # extra columns for the rows of this case
    method: Method = field(default_factory=Method)


@dataclass(frozen=True)
class Derived:
    """A figure a suite computes from its measured rows (e.g. a fit across cases), reported as a row."""

    case: Case
    metric: Metric
    value: float
    message: str = ""  # how it was derived, e.g. "least-squares fit over nodes=1,10,100,1000"
    # The figure's samples, carrying its parents' noise: gpubench.timing.stats.propagate(fn, parents' samples) (or a
    # parent's own samples where the figure is one of them). Empty only for a figure from single numbers.
    samples: tuple[float, ...] = ()
    # Columns the row carries besides (e.g. timing_method: "host clock" when a parent was host-timed, so that
    # compare knows the figure's level moves between processes as its parents' does).
    extra: tuple[tuple[str, Any], ...] = ()
    # The case ids of the measured rows it is computed from. Where they carry the host's pace (host-timed or paced
    # samples), the row carries theirs, per process their median, so that compare judges it at the baseline's
    # pace as it does them (a fit over graph launches, the eager chain's speedup: blind as measured).
    parents: tuple[str, ...] = ()


@dataclass(frozen=True)
class GridContext:
    """What a suite may know when it lays out its grid: sizes follow the device's cache, never a constant."""

    backend: str
    quick: bool
    cache_bytes: int
    memory_bytes: int
    # Memory a case may take now (gpubench.machine.memory_budget.budget: a share of what is available); None: memory_bytes.
    budget_bytes: int | None = None
    sizes: tuple[int, ...] | None = None  # --sizes, in bytes, where the suite has a size axis
    dtypes: tuple[str, ...] | None = None  # --dtype
    search: bool = False  # --search: a suite with a search mode (gemm) sweeps its shapes; others ignore it
    device_index: int = 0  # the device this run measures (--device)
    device_count: int = 1  # devices of this backend on the host, for suites with pairs (peer copies)
    # The values of the suite's own options (its ``Suite.options``), frozen: ``ctx.options.min_bytes``.
    options: Options = field(default_factory=Options)
    group: Any = None  # the ranks of a multi-process suite (gpubench.ranks.group.Group), else None
    # Ranks the grid is laid out for before they exist (the parent that starts them checks the grid first).
    world_size: int = 1
    # Lines a suite has to say about its grid (it shrank to fit memory): the run prints them and keeps them.
    notes: list[str] = field(default_factory=list, compare=False, hash=False)
    # What the suite learns during this run (comm: its ranks' seeds, whether the device is warm, its notes), so that a
    # suite object holds no run state. Mutable, one per suite and run; ``dataclasses.replace`` starts it empty.
    state: dict[str, Any] = field(default_factory=dict, init=False, compare=False, hash=False, repr=False)

    def __post_init__(self):
        if not isinstance(self.options, Options):  # a mapping or (name, value) pairs
            object.__setattr__(self, "options", Options(self.options))

    @property
    def budget(self) -> int:
        return self.memory_bytes if self.budget_bytes is None else self.budget_bytes

    def note(self, suite: str, text: str) -> None:
        line = f"{suite}: {text}"
        if line not in self.notes:
            self.notes.append(line)

    def pick_dtypes(self, suite: str, known: Iterable[str], default: Iterable[str]) -> list[str]:
        """--dtype if given (each must be one of ``known``: else a UsageError naming them), else ``default``."""
        if not self.dtypes:
            return list(default)
        known = list(known)
        unknown = [d for d in self.dtypes if d not in known]
        if unknown:
            raise UsageError(f"{suite} has no dtype {', '.join(unknown)}: choose from {', '.join(known)}")
        return list(self.dtypes)


class Suite:
    """Base class of every suite; subclass it in one file under ``suites/`` (or register an entry point)."""

    name: ClassVar[str]
    version: ClassVar[int]  # bump whenever what the suite measures changes: compare refuses across versions
    backends: ClassVar[frozenset[str]]
    metrics: ClassVar[tuple[Metric, ...]]
    description: ClassVar[str] = ""
    # Parameter names that are per-case columns; fixes their order in the table.
    params: ClassVar[tuple[str, ...]] = ()
    # Metrics the run's summary shows beside the first one (comm: algbw and busbw next to time).
    shown: ClassVar[tuple[str, ...]] = ()
    # Parameter columns that split the run's summary into one table each (comm: one per collective).
    blocks: ClassVar[tuple[str, ...]] = ()
    # True for a suite that runs as one process per rank (comm): the CLI starts the ranks, or joins a launcher's.
    multiprocess: ClassVar[bool] = False
    # A suite that runs its own way instead of the case loop (autotune: child comm runs, fresh processes per NCCL
    # configuration): the CLI hands its engine the run's request (gpubench.suite).
    driver: ClassVar[Engine | None] = None
    # The suite's own command-line options: ``gpubench run --help`` lists them under the suite's name, and
    # their values reach ``cases`` and ``prepare`` as ``ctx.options`` (gpubench/options.py).
    options: ClassVar[tuple[Option, ...]] = ()
    # Where ``gpubench report`` places this suite's charts among the others' (lower first; a tie goes by name).
    chart_order: ClassVar[int] = 100
    # Other ways into and out of the suite's table (gpubench.suite): ``gpubench run --engine NAME`` engines besides
    # gpubench's own loop (comm: the nccl-tests binaries), ``gpubench import TOOL`` readers of other tools' logs,
    # ``gpubench export --format NAME`` writers of its rows in other tools' formats.
    engines: ClassVar[tuple[Engine, ...]] = ()
    importers: ClassVar[tuple[Importer, ...]] = ()
    exporters: ClassVar[tuple[Exporter, ...]] = ()

    def cases(self, ctx: GridContext) -> Iterable[Case]:
        raise NotImplementedError

    def notes(self, ctx: GridContext | None) -> list[str]:
        """Lines about what the run did not measure, or measured otherwise than asked, read from ``ctx`` (the
        run's context, its ``state``) after the last case: the CLI prints them under the table and run.json
        keeps them. None by default."""
        return []

    def prepare(self, case: Case, backend: Backend, ctx: GridContext | None = None) -> Workload:
        """The workload of ``case``; ``ctx`` is the context its grid was laid out in (the same options)."""
        raise NotImplementedError

    @classmethod
    def charts(cls, runs: list[Any], out: Path) -> list[Any]:
        """The report's charts of this suite's rows in ``runs`` (gpubench.report.runs.Run), drawn into the
        folder ``out``: a list of gpubench.report.plotting.Chart, empty where the runs have none. None by
        default; ``gpubench report`` asks every registered suite."""
        return []

    @classmethod
    def roof(cls, row: Mapping[str, Any]) -> str | None:
        """The roof a row's figure is held against ("memory", "vector", "tensor", "host link", "peer link": see
        gpubench.machine.spec_peaks), for a row written before rows carried their ``roof`` column; None: none. The roofline and
        compare's % of spec peak select rows by it, never by suite."""
        return None

    @classmethod
    def point_label(cls, row: Mapping[str, Any]) -> str:
        """How the roofline's legend names the series of this suite's row (gemm: its library)."""
        return cls.name

    def per_process(self, case: Case) -> bool:
        """Whether ``case``'s level is set per process (host-timed, host-bound, host buffers: gpubench.results.host_set):
        the runner then measures it in ``--processes`` processes, so that one run holds how far it moves between
        them. False by default."""
        return False

    def fleet_key(self, case: Case, ctx: GridContext) -> str:
        """What ``case`` is to the GPUs of a ``--devices`` run, which go case by case in step and so must lay out
        the same grid: its id by default. A suite whose cases name devices (copy: gpu0→gpu1) says which case it is
        relative to the rank's own device, so that the grids of two GPUs agree where their ids cannot."""
        return case.id

    def summarize(self, rows: list[dict[str, Any]]) -> list[Derived]:
        """Figures derived across this suite's measured rows, after its last case. None by default."""
        return []
