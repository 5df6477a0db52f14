"""Timing one case: the engine (the only code that reads a clock), its batch strategies, stop rule, graph capture and
input fills, and the statistics derived from raw samples (with the line that relates a host-timed figure to the
host's pace).

It may import gpubench's floor modules (errors, units, suite, options), the machine (gpubench.backends,
gpubench.machine), the results' schema and gpubench.ranks (the ranks agree on the engine's decisions); nothing that
runs a whole run (gpubench.run) or reads runs (compare, report, check).
"""
