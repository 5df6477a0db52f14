"""Heartbeats: what each rank publishes to the rendezvous store, and the words naming the ranks that did not arrive.

A beat says where its rank is (a counter of control-plane steps, the case), when it last moved, and who it is:
pid and host, and the machine (boot id and pid namespace), so that a rank on the same machine can look at a
peer's process itself: gone or stopped is then known at once, without waiting for its beat to go stale. A rank
that ends on a signal it could catch (SIGTERM, SIGHUP) says so in a last beat (``ended``).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from gpubench.machine.procfs import machine, proc_stat, started

if TYPE_CHECKING:
    from torch.distributed import Store

PREFIX = "gpubench/"
HEARTBEAT_S = 0.5
STALE_S = 4 * HEARTBEAT_S + 1  # a heartbeat older than this: its rank is dead or stopped


def key(rank: int) -> str:
    return f"{PREFIX}hb/{rank}"


def local_state(beat: dict[str, Any], here: str) -> str | None:
    """``gone`` or ``stopped`` for a rank on this machine whose process is so; None where it runs or is elsewhere."""
    if not _seen_here(beat, here):
        return None
    fields = proc_stat(beat["pid"])
    if fields is None or fields[0] in ("Z", "X") or (beat.get("start") and started(beat["pid"]) != beat["start"]):
        return "gone"
    return "stopped" if fields[0] in ("T", "t") else None


def read(store: Store, world_size: int) -> dict[int, dict[str, Any]]:
    """Each rank's last heartbeat, for the ranks that published one; raises where the store does (gone, unanswering:
    the caller bounds it, :mod:`gpubench.ranks.store`)."""
    keys = [key(r) for r in range(world_size)]
    if hasattr(store, "multi_get") and store.check(keys):  # one round trip for the whole world
        return {r: json.loads(v) for r, v in enumerate(store.multi_get(keys))}
    return {r: json.loads(store.get(k)) for r, k in enumerate(keys) if store.check([k])}


def read_heartbeats(store: Store, world_size: int) -> dict[int, dict[str, Any]]:
    """Each rank's last heartbeat, for the ranks that published one; none where the store cannot be read."""
    try:
        return read(store, world_size)
    except Exception:  # noqa: BLE001 — a store that went away leaves the ranks unknown, not the caller dead
        return {}


def who(rank: int, beat: dict[str, Any] | None) -> str:
    """``rank 3 (pid 123 on gpu07)``, as much of it as is known."""
    if not beat or "pid" not in beat:
        return f"rank {rank}"
    return f"rank {rank} (pid {beat['pid']} on {beat.get('host', '?')})"


def lost(beats: dict[int, dict[str, Any]], world_size: int, *, now: float, stale_s: float, here: str) -> list[int]:
    """The ranks that will not come: never started, ended, gone or stopped on this machine, or silent for stale_s
    elsewhere. A rank on this machine whose process runs is not lost for a stale beat: its beating thread waited for
    a core on a busy host, and a rank ending on SIGTERM that called it lost would close the run failed, not
    interrupted; if it hangs, it stops moving, which the watchdog's no-progress rule sees."""
    out = []
    for r in range(world_size):
        b = beats.get(r)
        if (b is None or b.get("ended") or local_state(b, here)
                or (now - b["time"] > stale_s and not _seen_here(b, here))):
            out.append(r)
    return out


def _seen_here(beat: dict[str, Any], here: str | None) -> bool:
    """Whether the beat's process is on this machine, where :func:`local_state` can look at it."""
    return here is not None and beat.get("machine") == here and isinstance(beat.get("pid"), int)


def laggards(beats: dict[int, dict[str, Any]], world_size: int, *, now: float, stale_s: float,
             here: str | None = None, me: int | None = None) -> str:
    """Which ranks did not arrive, in words: missing, ended, gone, stopped, silent for ``stale_s``, or behind (the
    asking rank ``me`` left out)."""
    if not beats:
        # Every rank publishes one within a heartbeat of starting: none readable means the store is out of reach.
        return ("no rank's heartbeat could be read from the rendezvous store: the process that hosted it "
                "(gpubench's spawner, torchrun's agent or rank 0) may be gone")
    top = max(b["step"] for b in beats.values())
    words = []
    for r in range(world_size):
        if r == me:
            continue
        b = beats.get(r)
        state = local_state(b, here) if b is not None and here else None
        if b is None:
            words.append(f"rank {r} never started")
        elif b.get("ended"):
            words.append(f"{who(r, b)} ended on {b['ended']} in {b['where'] or 'setup'}")
        elif state:
            words.append(f"{who(r, b)} is {state} ({'its process ended' if state == 'gone' else 'SIGSTOP'}) in "
                         f"{b['where'] or 'setup'}")
        elif now - b["time"] > stale_s:
            why = "its process runs here: starved of CPU or wedged" if _seen_here(b, here) else "dead or stopped"
            words.append(f"{who(r, b)} silent for {now - b['time']:.0f} s ({why}) in {b['where'] or 'setup'}")
        elif b["step"] < top:
            words.append(f"{who(r, b)} behind, still in {b['where'] or 'setup'}")
    if not words:
        where = sorted({b["where"] for b in beats.values()})
        return f"every rank is inside the same step ({', '.join(where)}): the operation itself hung"
    return "; ".join(words)


def unreachable(roster: dict[int, dict[str, Any]], host: str, address: str, waited_s: float, here: str) -> str:
    """Words for a store that did not answer: who hosts it, and what is known of the ranks on this machine."""
    hosted = roster.get(0) if host == "rank 0" else None
    state = local_state(hosted, here) if hosted else None
    if hosted and state is None and hosted.get("machine") == here:
        time.sleep(0.5)  # its sockets close before its process is gone: look once more
        state = local_state(hosted, here)
    words = [f"the rendezvous store at {address} could not be read (no answer within {waited_s:g} s, or refused): "
             + (f"{who(0, hosted)}, which hosts it, is {state or 'stopped, gone or out of reach'}" if host == "rank 0"
                else f"{host}, which hosts it, is stopped, gone or out of reach")]
    for r, b in sorted(roster.items()):
        other = local_state(b, here) if r != 0 or host != "rank 0" else None
        if other:
            words.append(f"{who(r, b)} is {other}")
    return "; ".join(words)


def dumps(beat: dict[str, Any]) -> str:
    return json.dumps(beat)


__all__ = ["PREFIX", "HEARTBEAT_S", "STALE_S", "key", "machine", "started", "local_state", "read", "read_heartbeats",
           "who", "lost", "laggards", "unreachable", "dumps"]
