"""Polling the facts while the check loads the GPUs (:class:`FactsWatch`): the current PCIe link (an idle GPU drops
its link to Gen1 to save power, so only the highest value seen under load means anything), the clock-event
("throttle") reasons, and the processes holding the GPU, told apart from the check's own."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gpubench.check.facts.fields import Gpu
from gpubench.check.facts.readers.base import FactsReader
from gpubench.check.facts.rules import FOLDS
from gpubench.machine.contention import PROC, cpu_times, descendants, process_name


def process_tree(root_pid: int, proc: Path = PROC) -> set[int]:
    """``root_pid`` and all its descendants, from /proc's parent links (``proc`` for tests). The root is in the
    answer even where /proc cannot be read."""
    return descendants({root_pid}, cpu_times(proc))


def empty_seen() -> dict[str, Any]:
    """What :meth:`FactsWatch.seen` answers for a GPU no poll read."""
    return {**dict.fromkeys(FOLDS), "foreign": None, "hidden_others": 0, "hidden_pids": [], "polls": 0}


class FactsWatch:
    """Polls ``reader`` for every GPU in a daemon thread while the check loads the GPUs (a context manager), keeping
    per GPU each polled field as its fact folds it (:data:`gpubench.check.facts.rules.FOLDS`: the highest PCIe
    generation and width seen, the union of throttle reasons), the processes that were not ours and how many polls
    read anything.

    ``own_pids()`` returns this run's processes (this one and its descendants, :func:`process_tree`, plus any worker
    the runner knows); it is asked only when the GPU lists a pid not yet known as ours, and a pid once ours stays
    ours, so a worker that exits between two polls is never taken for a stranger. Where the GPU lists pids of another
    pid namespace (a container sees the host's, none of them ours or in our /proc), one of them is ours and which
    cannot be told: the others are counted, as :mod:`gpubench.machine.contention` counts them.
    """

    def __init__(self, reader: FactsReader, gpus: Iterable[Gpu | int], own_pids: Callable[[], Iterable[int]],
                 interval_s: float = 0.25, proc: Path = PROC):
        self.reader = reader
        self.gpus = [g if isinstance(g, int) else g[0] for g in gpus]
        self.own_pids = own_pids
        self.interval_s = interval_s
        self.proc = proc
        self._own: set[int] = set()  # pids once ours stay ours
        self._strangers: set[int] = set()  # pids found not ours once: a process never joins our tree later
        self._seen = {g: empty_seen() for g in self.gpus}
        self._lock = threading.Lock()  # guards _seen, which seen() reads from another thread
        self._polling = threading.Lock()  # one poll at a time: a direct poll_once beside the thread's
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll_once(self) -> None:
        """Read every GPU once and fold the readings in; never raises."""
        with self._polling:
            self._poll_all()

    def _poll_all(self) -> None:
        for gpu in self.gpus:
            try:
                r = self.reader.poll(gpu)
                pids = r.get("pids")
                others = self._others(pids) if pids is not None else None
                with self._lock:
                    self._fold(self._seen[gpu], r, others)
            except Exception:  # a poll that fails is a poll that read nothing
                continue

    def _is_own(self, pids: list[int]) -> set[int] | None:
        """Our pids among ``pids`` (None: own_pids failed, so no pid can be judged this poll). own_pids is asked
        after the device was read, so a worker the device lists is alive and in our tree when asked."""
        new = set(pids) - self._own - self._strangers
        if new:
            try:
                self._own |= {int(p) for p in self.own_pids()}
            except Exception:
                return None
            self._strangers |= new - self._own
        return self._own & set(pids)

    def _others(self, pids: list[int]) -> tuple[dict[int, str], list[int]] | None:
        """({foreign pid: name}, host pids of another namespace), or None where ownership is unknown."""
        pids = [int(p) for p in pids]
        own = self._is_own(pids)
        if own is None:
            return None
        if pids and not own and not any((self.proc / str(p)).exists() for p in pids):
            return {}, pids
        return {p: process_name(p, self.proc) for p in pids if p not in own}, []

    @staticmethod
    def _fold(s: dict[str, Any], r: dict[str, Any], others: tuple[dict[int, str], list[int]] | None) -> None:
        read = False
        for key, fold in FOLDS.items():
            v = r.get(key)
            got = fold(s[key], v) if v is not None else None
            if got is not None:
                s[key], read = got, True
        if others is not None:
            named, hidden = others
            # The name from the first sight: the process may be gone by the time the check is judged.
            s["foreign"], read = {**named, **(s["foreign"] or {})}, True
            if len(hidden) - 1 > s["hidden_others"]:
                s["hidden_others"], s["hidden_pids"] = len(hidden) - 1, sorted(hidden)
        s["polls"] += int(read)

    def seen(self, gpu: int) -> dict[str, Any]:
        """What was seen on ``gpu`` so far (a copy); None for a fact no poll could read. ``pcie_gen``,
        ``pcie_width``: the highest seen; ``throttle``: every reason seen, sorted; ``foreign``: {pid: "pid 4321
        (python3)"} of every process not ours, named when first seen; ``hidden_others``, ``hidden_pids``: the most
        other processes seen at once in another pid namespace, and that poll's host pids; ``polls``: how many polls
        read anything."""
        with self._lock:
            s = self._seen.get(gpu) or empty_seen()
            return {k: (v.copy() if isinstance(v, (list, dict)) else v) for k, v in s.items()}

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.poll_once()

    def __enter__(self) -> FactsWatch:
        self._stop.clear()
        self.poll_once()
        self._thread = threading.Thread(target=self._run, name="gpubench-facts", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> bool:
        # No last poll: workers end with the load, and a context torn down late is not a stranger's.
        self._stop.set()
        if self._thread is not None:
            # Bounded: a read stuck in the driver must not stall the check; the daemon thread is then abandoned.
            self._thread.join(timeout=max(1.0, 4 * self.interval_s))
        return False
