"""Where the health facts come from: NVML (:mod:`.nvml`), amdsmi (:mod:`.amdsmi`), the fake backend
(:mod:`.fake`), or nothing (:class:`NullFacts`). :func:`open_facts` picks one; nothing here raises for a missing
library or an unreadable field: the reader's facts are then unknown and it says why ("nvidia-ml-py is not
installed: pip install nvidia-ml-py")."""

from __future__ import annotations

from gpubench.check.facts.fields import Gpu
from gpubench.check.facts.readers.amdsmi import AMDSMI_HINT, NOT_ON_ROCM, AmdSmiFacts
from gpubench.check.facts.readers.base import (FactsReader, FactsUnavailable, NullFacts, VendorFacts, unknown_poll,
                                               unknown_static)
from gpubench.check.facts.readers.fake import FAKE_ENV, FAKE_POLL, FAKE_STATIC, FakeFacts
from gpubench.check.facts.readers.nvml import NVML_HINT, NvmlFacts


def open_facts(backend: str, gpus: list[Gpu]) -> FactsReader:
    """The facts reader for ``backend`` ("cuda" → NVML, "hip" → amdsmi, "fake" → :class:`FakeFacts`, anything
    else → :class:`NullFacts`). Never raises: a missing or broken library gives NullFacts with the reason."""
    if backend == "fake":
        return FakeFacts(gpus)
    cls = {"cuda": NvmlFacts, "hip": AmdSmiFacts}.get(backend)
    if cls is None:
        return NullFacts(gpus, f"no GPU health facts on the {backend} backend")
    try:
        return cls(gpus)
    except FactsUnavailable as e:
        return NullFacts(gpus, str(e))
    except Exception as e:
        return NullFacts(gpus, f"{cls.source} facts failed: {e!r}")


__all__ = ["open_facts", "FactsReader", "FactsUnavailable", "NullFacts", "VendorFacts", "NvmlFacts", "AmdSmiFacts",
           "FakeFacts", "unknown_static", "unknown_poll", "FAKE_ENV", "FAKE_STATIC", "FAKE_POLL", "NVML_HINT",
           "AMDSMI_HINT", "NOT_ON_ROCM"]
