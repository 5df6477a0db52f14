"""The machine a run measures on, beside its device: what it is (fingerprint, topology, telemetry, spec peaks), how
much memory a case may take, how fast its host runs now (the host's pace), and who else uses it (other processes and
other gpubench runs).

It may import gpubench's floor modules (errors, units) only: the backends and everything above read it.
"""
