"""For a multi-process suite, engine or driver: the launcher's environment of this rank, how a rank that cannot
finish ends, NCCL's own memory for a collective's buffers, and a child gpubench process's command line and the
request handed to it."""

from gpubench.child import command
from gpubench.ranks import ncclmem
from gpubench.ranks.ending import ENDING
from gpubench.ranks.env import detect
from gpubench.run.request import DEFAULT_TIMEOUT_S, dumps

__all__ = ["DEFAULT_TIMEOUT_S", "ENDING", "command", "detect", "dumps", "ncclmem"]
