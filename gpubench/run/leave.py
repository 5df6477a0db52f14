"""Out of a process at once, its work done and said: what the interpreter's exit would run, without its teardown.

With torch loaded, tearing the interpreter down (its thousands of modules and objects) takes seconds on a busy
machine: on the 2-core VM beside other jobs, 2-3.6 s after a bare ``import torch``, 5-14 s with 4 GiB of tensors
alive, 2.3-2.7 s after a run's last line in a terminal. None of it is gpubench's: tables are written after each
case, the exit handlers (temporary folders, child processes) run here, the output is flushed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from typing import NoReturn


def at_once(code: int) -> NoReturn:
    """Run the exit handlers, flush the standard streams, end the process with ``code``."""
    atexit._run_exitfuncs()  # what atexit would have run at the interpreter's exit
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


__all__ = ["at_once"]
