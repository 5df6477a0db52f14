"""One run of ``gpubench run``: the request, its plan, the processes that measure (this one, the workers of figures
set per process, the ranks it starts or joins), the rows each case gives, and how a run ends (interrupts, leaving
at once).

It may import everything below it: the suite contract, the machine and backends, results, ranks, timing. Above it
only the commands and the check (which runs its stations through it).
"""
