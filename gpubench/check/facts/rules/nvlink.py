"""``nvlink`` (titled by the interconnect: NVLink, or XGMI on AMD): a link down FAILs; a GPU without links SKIPs. A
GPU whose links are all down SKIPs too: PCIe cards without an NVLink bridge list their links as inactive, and a
fabric that is down shows in the P2P checks. ``nvlink`` holds every link's state: 1 up, 0 down, None not a link
of this GPU."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpubench.check.facts.rules.common import Fact, Static, Seen, skip, verdict
from gpubench.check.verdicts import Verdict

CHECK, TITLE = "nvlink", "NVLink"


def judge(gpu: int, static: Static, seen: Seen | None = None, row_throttle: Iterable[str] = (),
          row_pids: Mapping[int, str] | None = None) -> Verdict:
    name = static.get("interconnect") or "NVLink"
    links = static.get("nvlink")
    if links is None:
        return skip(gpu, CHECK, f"{name} state not readable", static, name)
    present = [i for i, s in enumerate(links) if s is not None]
    down = [i for i in present if not links[i]]
    if not present:
        return verdict(gpu, CHECK, "SKIP", f"no {name} on this GPU", name)
    up = len(present) - len(down)
    if not up:
        return verdict(gpu, CHECK, "SKIP", f"{name}: 0 of {len(present)} links up (not connected, or all down)",
                       name)
    if down:
        which = ", ".join(map(str, down))
        return verdict(gpu, CHECK, "FAIL", f"{name}: {up} of {len(present)} links up "
                       f"(link{'s' if len(down) > 1 else ''} {which} down)", name)
    return verdict(gpu, CHECK, "PASS", f"{up} of {len(present)} {name} links up", name)


# A healthy H100 SXM: 18 of 18 links up.
FACT = Fact(CHECK, TITLE, static={"nvlink": [1] * 18}, poll={}, rule=judge)
