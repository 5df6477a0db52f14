"""``ecc``: uncorrected ECC errors since the driver loaded FAIL; only in the GPU's lifetime WARN; ECC off or absent
SKIPs. Only NVML tells the two counts apart; amdsmi's one count makes no claim about when."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpubench.check.facts.fields import as_int
from gpubench.check.facts.rules.common import Fact, Static, Seen, skip, verdict
from gpubench.check.verdicts import Verdict

CHECK, TITLE = "ecc", "ECC errors"


def _errors(n: int) -> str:
    return f"{n} uncorrected ECC error{'s' if n != 1 else ''}"


def judge(gpu: int, static: Static, seen: Seen | None = None, row_throttle: Iterable[str] = (),
          row_pids: Mapping[int, str] | None = None) -> Verdict:
    enabled = static.get("ecc_enabled")
    if enabled is None:
        return skip(gpu, CHECK, "no ECC reporting", static, TITLE)
    if not enabled:
        return verdict(gpu, CHECK, "SKIP", "ECC is off", TITLE)
    vol, agg = as_int(static.get("ecc_uncorrected")), as_int(static.get("ecc_uncorrected_aggregate"))
    if vol:
        since = " since the driver loaded" if agg is not None else ""
        return verdict(gpu, CHECK, "FAIL", _errors(vol) + since, TITLE)
    if agg:
        text = (f"{agg} uncorrected errors in the GPU's lifetime, none since the driver loaded" if vol == 0
                else f"{_errors(agg)} in the GPU's lifetime")
        return verdict(gpu, CHECK, "WARN", text, TITLE)
    if vol is None and agg is None:
        return skip(gpu, CHECK, "ECC error counts not readable", static, TITLE)
    return verdict(gpu, CHECK, "PASS", "no uncorrected ECC errors", TITLE)


# ecc_uncorrected: since the driver loaded (volatile); ecc_uncorrected_aggregate: over the GPU's life.
FACT = Fact(CHECK, TITLE, static={"ecc_enabled": True, "ecc_uncorrected": 0, "ecc_uncorrected_aggregate": 0},
            poll={}, rule=judge)
