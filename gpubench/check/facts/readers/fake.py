"""The fake backend's facts: a healthy GPU (every fact's declared healthy values: PCIe Gen5 x16 of Gen5 x16, no ECC
errors, no remaps, 18 of 18 NVLinks up, no throttling, no other process), overridden per GPU by
``GPUBENCH_FAKE_FACTS``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from gpubench.check.facts.fields import Gpu
from gpubench.check.facts.readers.base import FactsReader, unknown_poll, unknown_static
from gpubench.check.facts.rules import HEALTHY_POLL, HEALTHY_STATIC

FAKE_ENV = "GPUBENCH_FAKE_FACTS"
FAKE_STATIC: dict[str, Any] = HEALTHY_STATIC
FAKE_POLL: dict[str, Any] = HEALTHY_POLL


class FakeFacts(FactsReader):
    """The fake backend's reader, overridden per GPU by ``GPUBENCH_FAKE_FACTS``, a JSON object
    ``{"<gpu index>": {field: value}}`` whose fields are those NVML's reader returns (``{"3": {"pcie_width": 8}}``,
    ``{"1": {"throttle": ["HwSlowdown"]}}``, ``{"0": {"pids": [4242]}}``); ``"nvlink_down": [3, 7]`` marks those
    links inactive. The polled pids always include this process, as a real GPU's do while we load it, so ``pids``
    names the others. A malformed variable leaves every fact unknown with the error as the reason: a typo must not
    read as a healthy GPU."""

    source = "fake"

    def __init__(self, gpus: Iterable[Gpu], env: Mapping[str, str] | None = None):
        super().__init__(gpus)
        raw = (os.environ if env is None else env).get(FAKE_ENV, "")
        try:
            self._over = _parse(raw)
        except ValueError as e:
            self._over, self.why = {}, f"{FAKE_ENV}: {e}"

    def static(self, gpu: int) -> dict[str, Any]:
        if self.why:
            return unknown_static(self.why)
        over = self._over.get(gpu, {})
        out = {**FAKE_STATIC, **{k: v for k, v in over.items() if k in FAKE_STATIC}}
        links = list(out["nvlink"]) if out["nvlink"] is not None else None
        for link in over.get("nvlink_down", []) if links is not None else []:
            if 0 <= link < len(links):
                links[link] = 0
        return {**out, "nvlink": links, "interconnect": "NVLink", "why": {}}

    def poll(self, gpu: int) -> dict[str, Any]:
        if self.why:
            return unknown_poll()
        over = self._over.get(gpu, {})
        out = {**FAKE_POLL, **{k: v for k, v in over.items() if k in FAKE_POLL}}
        if out["pids"] is not None:
            # A real GPU under our load lists our process too; without it, a lone pid absent from /proc would be
            # read as our own pid seen from another pid namespace (FactsWatch), and never as a stranger.
            out["pids"] = sorted({os.getpid(), *out["pids"]})
        return out


def _parse(raw: str) -> dict[int, dict[str, Any]]:
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e})") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object of GPU index to fields")
    known = set(FAKE_STATIC) | set(FAKE_POLL) | {"nvlink_down"}
    out: dict[int, dict[str, Any]] = {}
    for key, fields in data.items():
        if not str(key).isdigit() or not isinstance(fields, dict):
            raise ValueError(f"entry {key!r}: want \"<gpu index>\": {{field: value}}")
        unknown = sorted(set(fields) - known)
        if unknown:
            raise ValueError(f"GPU {key}: unknown field {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        out[int(key)] = _check_fields(key, dict(fields))
    return out


def _check_fields(gpu: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The list fields' shapes, so that a wrong one is reported rather than read as something else (a throttle
    string would be folded as its letters)."""
    if isinstance(fields.get("throttle"), str):
        fields["throttle"] = [fields["throttle"]]
    shapes = {"throttle": str, "pids": int, "nvlink_down": int, "nvlink": (int, type(None))}
    for key, kind in shapes.items():
        v = fields.get(key)
        if v is not None and not (isinstance(v, list) and all(isinstance(x, kind) for x in v)):
            raise ValueError(f"GPU {gpu}: {key} must be a list, not {json.dumps(v)}")
    return fields
