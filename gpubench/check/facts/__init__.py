"""Health facts of each GPU for ``gpubench check``: what the driver says (read, not measured), judged PASS, WARN,
FAIL or SKIP, the way DCGM's diagnostic and the cloud node health checks (Azure's azurehpc-health-checks) judge a
node before it takes work.

Where each part lives:

* :mod:`.rules` — the facts, one module each (``pcie_link``, ``ecc``, ``row_remap``, ``nvlink``, ``throttle``,
  ``processes``): its check name and title, the fields it reads with a healthy GPU's values, and its rule (PASS,
  WARN, FAIL or SKIP and the message). :data:`.rules.FACTS` lists them; every list of checks, titles and fields
  is derived from it. SKIP is never a pass, and missing data never PASSes.
* :mod:`.readers` — where the fields come from: NVML, amdsmi, the fake backend, or nothing; found per GPU by uuid,
  then PCI bus id, then index (telemetry's lookup), read once (``static``) or polled (``poll``).
* :mod:`.watch` — :class:`FactsWatch` polls a reader while the check loads the GPUs and keeps what was seen.

A new health fact is one module in :mod:`.rules` (added to ``FACTS``) plus its test; a field no reader reads yet is
unknown there and its check SKIPs until the reader (readers/nvml.py, readers/amdsmi.py) reads it.

Sources: NVML API reference; NVIDIA's GPU memory error management guide (row remapping); DCGM diagnostics; ROCm
amdsmi Python API (README of ROCm/amdsmi py-interface and its amdsmi_interface.py).
"""

from __future__ import annotations

from gpubench.check.facts.fields import Gpu
from gpubench.check.facts.readers import (AMDSMI_HINT, FAKE_ENV, FAKE_POLL, FAKE_STATIC, NOT_ON_ROCM, NVML_HINT,
                                          AmdSmiFacts, FactsReader, FactsUnavailable, FakeFacts, NullFacts, NvmlFacts,
                                          open_facts, unknown_poll, unknown_static)
from gpubench.check.facts.rules import CHECKS, POLL_KEYS, STATIC_KEYS, TITLES, judge
from gpubench.check.facts.rules.throttle import THROTTLE_BENIGN, THROTTLE_FAIL, THROTTLE_WARN
from gpubench.check.facts.watch import FactsWatch, empty_seen, process_tree

__all__ = [
    "CHECKS", "TITLES", "STATIC_KEYS", "POLL_KEYS", "FAKE_ENV", "FAKE_STATIC", "FAKE_POLL", "NVML_HINT",
    "AMDSMI_HINT", "NOT_ON_ROCM", "THROTTLE_FAIL", "THROTTLE_WARN", "THROTTLE_BENIGN",
    "FactsReader", "FactsUnavailable", "NullFacts", "NvmlFacts", "AmdSmiFacts", "FakeFacts",
    "open_facts", "process_tree", "FactsWatch", "judge", "Gpu", "empty_seen", "unknown_static", "unknown_poll",
]
