"""Ctrl-C during a run: the first asks the run to stop (at the engine's next check, or after the case where the
ranks of a collective must finish it together); a second stops at once."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable


class StopFlag:
    """First SIGINT: stop (the runner and the engine look at ``set``). Second: KeyboardInterrupt, at once.

    ``asked`` is the handler's alone and never cleared; ``set`` may be overwritten by the ranks' agreement on it.
    A Ctrl-C that lands while that agreement is under way (the flag already sent, the answer not yet back) must
    count at the next one: were it noted in ``set`` only, the answer would overwrite it and the run go on.
    """

    def __init__(self, on_first: Callable[[], object] | None = None):
        self.set = False
        self.asked = False
        self._on_first = on_first
        self._old = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.asked:
            raise KeyboardInterrupt
        self.asked = self.set = True
        if self._on_first:
            self._on_first()

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
        return False


__all__ = ["StopFlag"]
