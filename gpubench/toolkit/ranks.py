"""For a multi-process suite, engine or driver: the launcher's environment of this rank, how a rank that cannot
finish ends, NCCL's own memory for a collective's buffers, and a child gpubench process's command line and the
request handed to it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpubench.toolkit import loaded_on_use

if TYPE_CHECKING:
    from gpubench.child import command
    from gpubench.ranks import ncclmem
    from gpubench.ranks.ending import ENDING
    from gpubench.ranks.env import detect
    from gpubench.run.request import DEFAULT_TIMEOUT_S, dumps

# Each loads when named: a suite's buffers need NCCL's memory, not the ending of ranks (which reads pandas).
_LAZY = {
    "ENDING": "gpubench.ranks.ending:ENDING", "detect": "gpubench.ranks.env:detect",
    "ncclmem": "gpubench.ranks.ncclmem",
    "command": "gpubench.child:command", "DEFAULT_TIMEOUT_S": "gpubench.run.request:DEFAULT_TIMEOUT_S",
    "dumps": "gpubench.run.request:dumps",
}
__getattr__ = loaded_on_use(__name__, _LAZY)

__all__ = sorted(_LAZY)
