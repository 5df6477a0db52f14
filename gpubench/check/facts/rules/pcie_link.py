"""``pcie_link``: the highest PCIe width or generation seen while the check loaded the GPU, below the highest this
device and this system allow, FAILs ("PCIe x8 of x16"). An idle GPU drops its link to Gen1 to save power, so only
the highest value seen under load means anything."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpubench.check.facts.fields import as_int
from gpubench.check.facts.rules.common import Fact, Static, Seen, skip, verdict
from gpubench.check.verdicts import Verdict

CHECK, TITLE = "pcie_link", "PCIe link"


def judge(gpu: int, static: Static, seen: Seen, row_throttle: Iterable[str] = (),
          row_pids: Mapping[int, str] | None = None) -> Verdict:
    max_gen, max_width = as_int(static.get("pcie_max_gen")), as_int(static.get("pcie_max_width"))
    gen, width = as_int(seen.get("pcie_gen")), as_int(seen.get("pcie_width"))
    low_gen = gen is not None and max_gen is not None and gen < max_gen
    low_width = width is not None and max_width is not None and width < max_width
    if low_gen and low_width:
        return verdict(gpu, CHECK, "FAIL", f"PCIe Gen{gen} x{width} of Gen{max_gen} x{max_width} "
                       "(the highest seen while the check ran)", TITLE)
    if low_width:
        return verdict(gpu, CHECK, "FAIL", f"PCIe x{width} of x{max_width}", TITLE)
    if low_gen:
        return verdict(gpu, CHECK, "FAIL", f"PCIe Gen{gen} of Gen{max_gen} (the highest seen while the "
                       "check ran)", TITLE)
    if None in (max_gen, max_width, gen, width):
        return skip(gpu, CHECK, "PCIe link not readable", static, TITLE)
    return verdict(gpu, CHECK, "PASS", f"PCIe Gen{gen} x{width} (of Gen{max_gen} x{max_width})", TITLE)


def _highest(so_far: int | None, reading: object) -> int | None:
    v = as_int(reading)
    return None if v is None else max(v, so_far or 0)


# The maximum is read once (NVML's takes the slot into account); the current link is polled under load, and the
# highest seen is what is judged.
FACT = Fact(CHECK, TITLE, static={"pcie_max_gen": 5, "pcie_max_width": 16},
            poll={"pcie_gen": 5, "pcie_width": 16}, rule=judge, fold={"pcie_gen": _highest, "pcie_width": _highest})
