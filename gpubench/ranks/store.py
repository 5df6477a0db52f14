"""The rendezvous store of a group of ranks: where it is (:class:`TcpRendezvous`, :class:`FileRendezvous`), and calls
to it the watchdog can give up on (:class:`BoundedStore`).

A TCPStore client's ``check``, ``get`` and ``multi_get`` (and the ping a new client sends) wait for the server's
answer with no bound: while the process hosting the store is stopped (SIGSTOP, a hung or swapped-out host) they
block whatever timeout the client was given, and every later call on the same client waits behind them
(docs/measurements.md, 'Faults'; a ``set`` returns, it only sends). So each call runs on a daemon thread of its
own, on a client no other call shares, and the caller waits for it until a deadline it owns: no answer by then is
an answer (:class:`Unanswered`). The thread and its client are left behind, never used again; while such a call
still hangs, the next one is refused at once rather than piling up threads.
"""

from __future__ import annotations

import datetime as dt
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class RendezvousError(Exception):
    """The store cannot be hosted or reached: what was tried, why it failed and what to set, in one line."""


class TcpRendezvous:
    """The launcher's store, a TCPStore at ``host:port`` (hosted by its ``world_size`` ranks' rank 0, torchrun's agent
    or gpubench's spawner); ``hint``: what to set where it cannot be reached (:func:`gpubench.ranks.env.rendezvous_hint`).
    """

    def __init__(self, host: str, port: int, world_size: int, hint: str = ""):
        self.host, self.port, self.world_size, self.hint = host, port, world_size, hint
        self.address = f"{host}:{port}"

    def reach(self, within_s: float, *, master: bool = False) -> None:
        """Before torch's client, whose connect retries silently for its whole timeout: the host resolves; where this
        process hosts the store, the host is this one; else something listens at the address within ``within_s``
        (a refused port is asked again: the host's rank may be starting)."""
        end, why = time.monotonic() + within_s, "no answer"
        addresses = self._resolve(within_s)
        if master:
            if not any(_local(a) for a in addresses):
                raise self._error(f"this rank hosts it, and {self.host} is not this host ({socket.gethostname()})")
            return
        while True:
            left = end - time.monotonic()
            try:
                socket.create_connection((self.host, self.port), timeout=max(0.1, min(left, 2.0))).close()
                return
            except ConnectionRefusedError:
                why = "refused: nothing listens there"
            except OSError as e:  # a timeout (a firewall that drops), no route to the host
                why = "no answer" if isinstance(e, TimeoutError) else (e.strerror or str(e))
            if time.monotonic() + 0.5 >= end:
                raise self._error(f"nothing answered there within {within_s:.0f} s ({why})")
            time.sleep(0.5)

    def _resolve(self, within_s: float) -> set[str]:
        """The host's addresses, asked on a thread: a resolver that does not answer is not waited for past
        ``within_s``."""
        box: dict[str, Any] = {}

        def ask() -> None:
            try:
                box["found"] = {a[4][0] for a in socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)}
            except (OSError, UnicodeError) as e:
                box["error"] = getattr(e, "strerror", None) or str(e)

        thread = threading.Thread(target=ask, name="gpubench-resolve", daemon=True)
        thread.start()
        thread.join(max(0.1, within_s))
        if "found" in box:
            return box["found"]
        raise self._error(f"{self.host} does not resolve here ({box.get('error') or 'no answer from the resolver'})")

    def _error(self, why: str) -> RendezvousError:
        return RendezvousError(f"the rendezvous store at {self.address} cannot be reached: {why}; {self.hint}"
                               if self.hint else f"the rendezvous store at {self.address} cannot be reached: {why}")

    def client(self, timeout_s: float, *, master: bool = False, connect_s: float | None = None) -> Any:
        """A client (the server too, ``master``) whose calls wait ``timeout_s``; ``connect_s``: how long its connect
        may take, where that is not ``timeout_s``."""
        import torch.distributed as dist

        wait = timeout_s if connect_s is None else connect_s
        store = dist.TCPStore(self.host, self.port, self.world_size, master, timeout=dt.timedelta(seconds=wait),
                              wait_for_workers=False)
        if wait != timeout_s:
            store.set_timeout(dt.timedelta(seconds=timeout_s))
        return store


def _local(address: str) -> bool:
    """Whether ``address`` is one of this host's (a socket binds to it)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((address, 0))
        return True
    except OSError:
        return False


class FileRendezvous:
    """A store in a file, for ranks on one machine whose parent owns the file's folder (the check's stations). It
    opens no socket: torch's TCPStore looks up the name of every address it connects or accepts, and where the
    resolver drops some of a burst of such lookups each costs its 5-s timeout (docs/check.md, 'How it runs')."""

    WORKERS = 1 << 30  # torch deletes the file once this many clients have closed: never; its folder's owner does

    def __init__(self, path: str):
        self.address = self.path = path

    def reach(self, within_s: float, *, master: bool = False) -> None:
        """Nothing to reach: the file is made by its first client."""

    def client(self, timeout_s: float, *, master: bool = False, connect_s: float | None = None) -> Any:
        import torch.distributed as dist

        store = dist.FileStore(self.path, self.WORKERS)  # nothing to connect to: connect_s and master do not apply
        store.set_timeout(dt.timedelta(seconds=timeout_s))
        return store


class Unanswered(RuntimeError):
    """The store did not answer within the deadline: its host is stopped, gone or out of reach."""


class BoundedStore:
    """Calls ``fn(client)`` on a client from ``connect()``, each bounded by ``deadline_s``."""

    def __init__(self, connect: Callable[[], Any], deadline_s: float):
        self._connect = connect
        self.deadline_s = deadline_s
        self._client: Any = None
        self._hung: threading.Thread | None = None  # a call given up on, still waiting for its answer

    def close(self) -> None:
        """No more calls: the client is let go (a call still hanging keeps its own until it ends)."""
        self._client, self._connect = None, _closed

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


def _closed() -> Any:
    raise Unanswered("the store's group was left")


__all__ = ["BoundedStore", "Unanswered", "TcpRendezvous", "FileRendezvous", "RendezvousError"]
