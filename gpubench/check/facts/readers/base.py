"""What every facts reader offers (:class:`FactsReader`), the reader of no facts (:class:`NullFacts`) and the
shared half of the vendor readers (:class:`VendorFacts`). Readers know no rule: they return the fields the facts
declare (:data:`gpubench.check.facts.rules.STATIC_KEYS`, ``POLL_KEYS``), None where unknown."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any

from gpubench.check.facts.fields import Gpu
from gpubench.check.facts.rules import CHECKS, POLL_KEYS, STATIC_KEYS
from gpubench.machine.telemetry import read_or_none


def unknown_static(why: str | None, interconnect: str = "NVLink") -> dict[str, Any]:
    """Static facts of a GPU none of which is known; ``why`` (if given) is every check's reason."""
    return {**dict.fromkeys(STATIC_KEYS), "interconnect": interconnect,
            "why": dict.fromkeys(CHECKS, why) if why else {}}


def unknown_poll() -> dict[str, Any]:
    """A poll that read nothing."""
    return dict.fromkeys(POLL_KEYS)


class FactsUnavailable(Exception):
    """Raised by a reader's constructor when its library cannot be used; ``open_facts`` turns it into a
    :class:`NullFacts` with the message as the reason."""


class FactsReader:
    """What every reader offers. ``static(gpu)`` and ``poll(gpu)`` take the CUDA/HIP index and never raise."""

    source = "none"

    def __init__(self, gpus: Iterable[Gpu]):
        self.gpus = [tuple(g) for g in gpus]
        self.why: str | None = None  # why every fact is unknown, where one reason covers them all

    def static(self, gpu: int) -> dict[str, Any]:
        return unknown_static(self.why)

    def poll(self, gpu: int) -> dict[str, Any]:
        return unknown_poll()

    def close(self) -> None:
        """Release the vendor library; safe to call more than once."""

    def __enter__(self) -> FactsReader:
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False


class NullFacts(FactsReader):
    """The CPU backend's, or a missing library's: every fact unknown, with the reason."""

    def __init__(self, gpus: Iterable[Gpu], why: str):
        super().__init__(gpus)
        self.why = why


class VendorFacts(FactsReader):
    """One telemetry source per GPU: it holds the library open, found the device and decodes what telemetry
    already decodes (throttle reasons, processes). A GPU that cannot be opened has its reason instead.

    A vendor reader sets the class attributes below and implements :meth:`read_static` and :meth:`read_poll` on an
    open telemetry source; a field it does not return is unknown (None)."""

    telemetry: Callable[..., Any]  # (index, uuid, pci bus id, library) -> an open telemetry source
    interconnect = "NVLink"
    module: str  # the vendor library's Python module, imported where no stand-in is given
    hint: str  # what to install when it is missing

    def __init__(self, gpus: Iterable[Gpu], lib: Any = None):
        if lib is None:
            try:
                lib = importlib.import_module(self.module)
            except ImportError:
                raise FactsUnavailable(self.hint) from None
        super().__init__(gpus)
        self.lib = lib
        self._dev: dict[int, Any] = {}
        self._why: dict[int, str] = {}
        for index, uuid, pci in self.gpus:
            try:
                self._dev[index] = self.telemetry(index, uuid, pci, lib)
            except Exception as e:  # TelemetryUnavailable, or a library that breaks in a new way
                self._why[index] = str(e) or repr(e)

    def _missing(self, gpu: int) -> str:
        return self._why.get(gpu, f"GPU {gpu} was not among the GPUs this reader opened")

    def static(self, gpu: int) -> dict[str, Any]:
        t = self._dev.get(gpu)
        if t is None:
            return unknown_static(self._missing(gpu), self.interconnect)
        try:
            # Every declared field, in the declared order; one this reader does not read stays None.
            return {**dict.fromkeys(STATIC_KEYS), **self.read_static(t)}
        except Exception as e:  # each field is guarded; this is the last line
            return unknown_static(f"{self.source} failed: {e!r}", self.interconnect)

    def poll(self, gpu: int) -> dict[str, Any]:
        t = self._dev.get(gpu)
        if t is None:
            return unknown_poll()
        try:
            return {**unknown_poll(), **self.read_poll(t)}
        except Exception:
            return unknown_poll()

    def read_static(self, t: Any) -> dict[str, Any]:
        """The static fields of the GPU whose telemetry source is ``t``, plus "interconnect" and "why"."""
        raise NotImplementedError

    def read_poll(self, t: Any) -> dict[str, Any]:
        """The polled fields of the GPU whose telemetry source is ``t``."""
        raise NotImplementedError

    def close(self) -> None:
        for t in self._dev.values():
            read_or_none(t.close)
