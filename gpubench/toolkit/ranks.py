"""For a multi-process suite, engine or driver: the launcher's environment of this rank, how a rank that cannot
finish ends, NCCL's own memory for a collective's buffers, and the command line of a child gpubench process."""

from gpubench.child import command
from gpubench.ranks import ncclmem
from gpubench.ranks.ending import ENDING
from gpubench.ranks.env import detect

__all__ = ["ENDING", "command", "detect", "ncclmem"]
