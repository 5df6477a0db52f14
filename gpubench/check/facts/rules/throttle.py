"""``throttle``: hardware slowdown (HwSlowdown, HwThermalSlowdown, HwPowerBrakeSlowdown; amdsmi's prochot_thrm)
FAILs, software or firmware thermal slowdown WARNs; the power cap, idle, application clocks, sync boost and display
clocks PASS with a note: a GPU under a full GEMM load is expected to reach its power cap (GPU Boost runs up to it).
DCGM's power health watch warned on any power violation and its users reported that as a false positive
(NVIDIA/DCGM issue #285); azurehpc's node health check leaves sw_power_cap out of its throttle warning
(Azure/azurehpc PR #595). A reason this module does not know WARNs: it is never passed unseen."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpubench.check.facts.rules.common import Fact, Static, Seen, skip, verdict
from gpubench.check.verdicts import Verdict

CHECK, TITLE = "throttle", "throttling"

# Clock-event reasons by what they mean for a node (NVML's names; amdsmi's violation names from telemetry).
THROTTLE_FAIL = frozenset({"HwSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown", "prochot_thrm"})
THROTTLE_WARN = frozenset({"SwThermalSlowdown", "socket_thrm", "vr_thrm", "hbm_thrm"})
THROTTLE_BENIGN = frozenset({"SwPowerCap", "GpuIdle", "ApplicationsClocksSetting", "SyncBoost",
                             "DisplayClockSetting", "ppt_pwr"})
POWER_CAP_NOTE = ("reaching the power cap under a full GEMM load is normal (GPU Boost runs up to it); DCGM warned "
                  "on it and its users reported a false positive: NVIDIA/DCGM issue #285")


def _reasons(seen: Seen, row_throttle: Iterable[str]) -> set[str]:
    # Rows may carry a telemetry summary's comma-joined string ("HwSlowdown,SwPowerCap").
    rows = {part.strip() for r in row_throttle for part in str(r).split(",") if part.strip()}
    return set(seen.get("throttle") or ()) | rows


def judge(gpu: int, static: Static, seen: Seen, row_throttle: Iterable[str] = (),
          row_pids: Mapping[int, str] | None = None) -> Verdict:
    reasons = _reasons(seen, row_throttle)
    if seen.get("throttle") is None and not reasons:
        return skip(gpu, CHECK, "throttle reasons not readable", static, TITLE)
    hard = sorted(reasons & THROTTLE_FAIL)
    thermal = sorted(reasons & THROTTLE_WARN)
    unknown = sorted(reasons - THROTTLE_FAIL - THROTTLE_WARN - THROTTLE_BENIGN)
    benign = sorted(reasons & THROTTLE_BENIGN)
    notes = [f"reasons seen: {', '.join(sorted(reasons))}"] if reasons else []
    if {"SwPowerCap", "ppt_pwr"} & reasons:
        notes.append(POWER_CAP_NOTE)
    if hard:
        return verdict(gpu, CHECK, "FAIL", f"hardware throttling: {', '.join(hard)}", TITLE, notes)
    warn = ([f"thermal throttling: {', '.join(thermal)}"] if thermal else []) + (
        [f"throttle reason not recognised: {', '.join(unknown)}"] if unknown else [])
    if warn:
        return verdict(gpu, CHECK, "WARN", "; ".join(warn), TITLE, notes)
    if benign:
        return verdict(gpu, CHECK, "PASS", f"{', '.join(benign)} only: not a fault", TITLE, notes)
    return verdict(gpu, CHECK, "PASS", "no throttling seen", TITLE)


def _union(so_far: list[str] | None, reading: Iterable[str]) -> list[str]:
    return sorted(set(so_far or ()) | set(reading))


# Polled: every reason seen while the check ran.
FACT = Fact(CHECK, TITLE, static={}, poll={"throttle": []}, rule=judge, fold={"throttle": _union})
