"""Rendezvous-store calls the watchdog can give up on.

A TCPStore client's ``check``, ``get`` and ``multi_get`` (and the ping a new client sends) wait for the server's
answer with no bound: while the process hosting the store is stopped (SIGSTOP, a hung or swapped-out host) they
block whatever timeout the client was given, and every later call on the same client waits behind them (measured
with torch 2.13: ``check`` and a new client still blocked after 20 s against a 3 s timeout; a ``set`` returns,
it only sends). So each call runs on a daemon thread of its own, on a client no other call shares, and the caller
waits for it until a deadline it owns: no answer by then is an answer (:class:`Unanswered`). The thread and its
client are left behind, never used again; while such a call still hangs, the next one is refused at once
rather than piling up threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Unanswered(RuntimeError):
    """The store did not answer within the deadline: its host is stopped, gone or out of reach."""


class BoundedStore:
    """Calls ``fn(client)`` on a client from ``connect()``, each bounded by ``deadline_s``."""

    def __init__(self, connect: Callable[[], Any], deadline_s: float):
        self._connect = connect
        self.deadline_s = deadline_s
        self._client: Any = None
        self._hung: threading.Thread | None = None  # a call given up on, still waiting for its answer

    def call(self, fn: Callable[[Any], T], deadline_s: float | None = None) -> T:
        """``fn``'s result; its exception; or :class:`Unanswered` when it did not end within the deadline."""
        if self._hung is not None:
            if self._hung.is_alive():
                raise Unanswered("an earlier call to the store is still unanswered")
            self._hung = None
        box: dict[str, Any] = {}
        done = threading.Event()
        client = self._client

        def work() -> None:
            try:
                c = client if client is not None else self._connect()
                box["client"] = c
                box["value"] = fn(c)
            except BaseException as e:  # noqa: BLE001 — handed to the caller
                box["error"] = e
            done.set()

        thread = threading.Thread(target=work, name="gpubench-store-call", daemon=True)
        thread.start()
        limit = self.deadline_s if deadline_s is None else deadline_s
        if not done.wait(limit):
            self._client, self._hung = None, thread  # never used again: a later call gets a new client
            raise Unanswered(f"the store did not answer within {limit:.0f} s")
        if "error" in box:
            self._client = None  # a client that failed once may be half-way through a message
            raise box["error"]
        self._client = box["client"]
        return box["value"]


__all__ = ["BoundedStore", "Unanswered"]
