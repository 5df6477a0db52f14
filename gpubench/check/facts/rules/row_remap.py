"""``row_remap``: a remap failure FAILs (NVIDIA's memory error management guide: the GPU needs service); a remap
pending, pages pending retirement, or rows remapped for uncorrectable errors WARN (a reset applies a pending remap).
Row remapping is Ampere's and later's; older GPUs retire pages, and amdsmi's bad page list is read into the same
fields (a page that could not be retired is its remap failure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpubench.check.facts.fields import as_int
from gpubench.check.facts.rules.common import Fact, Static, Seen, skip, verdict
from gpubench.check.verdicts import State, Verdict, worst

CHECK, TITLE = "row_remap", "row remapping"


def _findings(static: Static) -> list[tuple[State, str]]:
    unc, cor = as_int(static.get("remap_uncorrected_rows")), as_int(static.get("remap_corrected_rows"))
    found: list[tuple[State, str]] = []
    if static.get("remap_failure"):
        pages = static.get("retired_pages") is not None  # amdsmi's counterpart: a page it could not retire
        found.append(("FAIL", "a bad page could not be retired: the GPU needs service" if pages
                      else "row remapping failed: the GPU needs service"))
    if static.get("remap_pending"):
        found.append(("WARN", "row remap pending: reset the GPU to apply it"))
    if static.get("retired_pages_pending"):
        found.append(("WARN", "retired pages pending: reset the GPU to retire them"))
    if unc:
        found.append(("WARN", f"{unc} rows remapped for uncorrectable errors, {cor or 0} for correctable"))
    return found


def judge(gpu: int, static: Static, seen: Seen | None = None, row_throttle: Iterable[str] = (),
          row_pids: Mapping[int, str] | None = None) -> Verdict:
    found = _findings(static)
    if found:
        state = worst(s for s, _ in found)
        return verdict(gpu, CHECK, state, "; ".join(t for s, t in sorted(found, key=lambda f: f[0] != state)),
                       TITLE)
    unc, cor = as_int(static.get("remap_uncorrected_rows")), as_int(static.get("remap_corrected_rows"))
    pending, pages = static.get("retired_pages_pending"), as_int(static.get("retired_pages"))
    if unc is not None or cor is not None or static.get("remap_pending") is not None:
        return verdict(gpu, CHECK, "PASS", f"no remap pending; rows remapped: {unc or 0} for uncorrectable "
                       f"errors, {cor or 0} for correctable", TITLE)
    if pending is not None:
        retired = f" ({pages} page{'s' if pages != 1 else ''} retired)" if pages is not None else ""
        return verdict(gpu, CHECK, "PASS", "no retired pages pending" + retired, TITLE)
    return skip(gpu, CHECK, "no row remapping or page retirement reporting", static, TITLE)


# retired_pages_pending is before Ampere's (NOT_SUPPORTED, None, after it); retired_pages is amdsmi's count.
FACT = Fact(CHECK, TITLE, static={"remap_corrected_rows": 0, "remap_uncorrected_rows": 0, "remap_pending": False,
                                  "remap_failure": False, "retired_pages_pending": None, "retired_pages": None},
            poll={}, rule=judge)
