"""``gpubench check``: a node's verdict per GPU, pair and node (docs/check.md). The stations that measure (one
process per GPU, driven through gpubench.run), the check sets and envelopes figures are held to, the health facts
(one reader module and one rule module each), the judging, the outputs and the fleet's gather.

It may import everything below the commands but the suites: the run, compare (its statistics and history), the
results, the machine and the console.
"""
