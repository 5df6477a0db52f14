"""Kernels gpubench writes itself (Triton), shared by the suites that time them and the tuners that sweep
their configurations. Importing a module here needs triton; suites import them lazily.

It imports nothing of gpubench: the suites bring the kernels what they need.
"""
