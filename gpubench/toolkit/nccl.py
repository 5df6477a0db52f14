"""For a suite that runs or imports nccl-tests/rccl-tests: their model (tools, collectives, NCCL's type names),
their text and JSON logs parsed into it, and the environment their binaries are started with."""

from gpubench.nccltests.envscrub import scrub
from gpubench.nccltests.model import BINARIES, NCCL_TYPES, TOOLS, ParseError, Row, Run, collective_of_binary, dtype_of
from gpubench.nccltests.parse_json import parse_json
from gpubench.nccltests.parse_text import parse_text

__all__ = ["BINARIES", "NCCL_TYPES", "TOOLS", "ParseError", "Row", "Run", "collective_of_binary", "dtype_of",
           "parse_json", "parse_text", "scrub"]
