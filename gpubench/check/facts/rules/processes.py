"""``processes``: a process that is not ours on the GPU WARNs ("GPU shared with pid 4321 (python3)"); it never
FAILs, since a shared GPU is slower, not broken. Which processes are ours FactsWatch decides while it polls."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpubench.check.facts.rules.common import Fact, Static, Seen, skip, verdict
from gpubench.check.verdicts import Verdict
from gpubench.machine.contention import process_name

CHECK, TITLE = "processes", "other processes"


def _name(pid: int, row_pids: Mapping[int, str], polled: Mapping[int, str]) -> str:
    given = row_pids.get(pid) or polled.get(pid)
    if not given:
        return process_name(pid)
    return given if given.startswith("pid ") else f"pid {pid} ({given})"


def judge(gpu: int, static: Static, seen: Seen, row_throttle: Iterable[str] = (),
          row_pids: Mapping[int, str] | None = None) -> Verdict:
    polled = seen.get("foreign")
    hidden = int(seen.get("hidden_others") or 0)
    if polled is None and row_pids is None and not hidden:
        return skip(gpu, CHECK, "processes on the GPU not readable", static, TITLE)
    rows = {int(p): name for p, name in (row_pids or {}).items()}
    pids = sorted(set(polled or ()) | set(rows))
    names = [_name(p, rows, polled or {}) for p in pids]
    parts = []
    if names:
        parts.append(", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else ""))
    if hidden:
        host = " ".join(map(str, seen.get("hidden_pids") or ()))
        parts.append(f"{hidden} other process{'es' if hidden > 1 else ''} (host pids {host})")
    if parts:
        return verdict(gpu, CHECK, "WARN", "GPU shared with " + "; ".join(parts), TITLE, names[3:])
    return verdict(gpu, CHECK, "PASS", "no other process on the GPU", TITLE)


# Polled: the pids holding the GPU (the fake reader adds its own process, as a real GPU under our load lists it);
# FactsWatch folds them into "foreign" and "hidden_others", telling the check's own processes from the others.
FACT = Fact(CHECK, TITLE, static={}, poll={"pids": []}, rule=judge)
