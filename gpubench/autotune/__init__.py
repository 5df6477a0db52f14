"""The ``autotune`` suite's collective knob sweep: NCCL/RCCL settings tried one configuration per fresh set of
processes (NCCL reads its parameters once per process), each through the comm suite with its check on, ending in
a per-size winner table and exports NCCL can load (an env file, the example tuner plugin's CSV).

Modules: :mod:`knobs` (which settings may be swept, the grid), :mod:`sweep` (the driver), :mod:`winners` (best
per size against the default, beyond noise or not), :mod:`exports` (env file, tuner CSV).
"""
