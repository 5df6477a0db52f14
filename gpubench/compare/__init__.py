"""``gpubench compare``: did anything change since the baseline, beyond noise? (docs/compare.md)

- :mod:`.load` — which runs a path names (a run, a table, a directory of runs, a baseline window);
  :mod:`.pool` — a side's rows pooled into one row per figure (each run, or process, one piece of evidence);
- :mod:`.verdict` — BETTER / WORSE / SAME / UNKNOWN per figure (runs as the unit of evidence; the rank test and
  the spread of run medians are :mod:`gpubench.timing.stats`');
- :mod:`.passes` — what the runs' metadata knows, applied to the verdicts in one place: a shared GPU and a busy
  host (:mod:`.shared_machine`), a rerun (:mod:`.confirm`), the directory's memory of earlier verdicts and
  acceptances (:mod:`.gate_memory`);
- :mod:`.settings` — software and settings that differ between the sides; :mod:`.cross` — system identity,
  cross-cluster refusal, % of spec peak;
- :mod:`.thresholds` — the TOML thresholds file; :mod:`.calibrate` writes one from runs of one machine;
- :mod:`.comparison` — a comparison from two paths (and the report page's comparisons);
- :mod:`.outputs` — the output formats, one module each (a new format is one file there), and what every output
  shows (:mod:`.outputs.common`);
- :mod:`.fleet` — devices far from the fleet median.

The command line's compare, calibrate and accept are :mod:`gpubench.commands`'. It may import the results, the
machine, timing's statistics, the registry and the console; nothing that runs (gpubench.run) or reports.
"""
