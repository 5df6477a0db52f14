"""Where the fabric check's ranks meet between rounds: keys on the launcher's rendezvous store, each read with a
deadline of its own. The ranks never meet in a collective once the rounds begin: a collective waits on every rank,
and a silent node would stall them all; a key that does not come by its deadline is an answer (silence)."""

from __future__ import annotations

import json
import time
from typing import Any

from gpubench.ranks.group import Group

PREFIX = "fabric/"
_POLL_S = 0.02


class Board:
    def __init__(self, group: Group, run: str):
        self.group, self.run = group, run
        self.store = group.store

    def _key(self, key: str) -> str:
        return f"{PREFIX}{self.run}/{key}"

    def put(self, key: str, value: object) -> None:
        try:
            self.store.set(self._key(key), json.dumps(value))
        except Exception:  # noqa: BLE001 — the store's host (rank 0, the leader) is gone: said in one line
            self.group.abort("the fabric check's leader (rank 0), which holds the board, is gone")

    def get(self, key: str, deadline: float) -> Any | None:
        """The value at ``key`` once it is there; None if it is not by ``deadline`` (time.monotonic)."""
        full = self._key(key)
        while True:
            try:
                if self.store.check([full]):
                    return json.loads(self.store.get(full))
            except Exception:  # noqa: BLE001 — as in put
                self.group.abort("the fabric check's leader (rank 0), which holds the board, is gone")
            if time.monotonic() >= deadline:
                return None
            self.group.step()  # waiting on a slow round is progress, not a hang
            time.sleep(_POLL_S)


__all__ = ["Board", "PREFIX"]
