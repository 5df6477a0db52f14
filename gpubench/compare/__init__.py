"""``gpubench compare``: did anything change since the baseline, beyond noise? (docs/compare.md)

- :mod:`.load` — which runs a path names (a run, a table, a directory of runs, a baseline window) and pooling;
- :mod:`.verdict` — BETTER / WORSE / SAME / UNKNOWN per figure (runs as the unit of evidence; the rank test
  and the spread of run medians are :mod:`gpubench.stats`'), and the post-passes that revise verdicts with run
  metadata (``POST_PASSES``, ``apply_post_passes``);
- :mod:`.thresholds` — the TOML thresholds file; :mod:`.calibrate` writes one from runs of one machine;
- :mod:`.cross` — system identity, cross-cluster refusal, % of spec peak;
- :mod:`.report` — a comparison from two paths (and the report page's comparisons); :mod:`.formats` —
  terminal, Markdown, JUnit, JSON;
- :mod:`.fleet` and :mod:`.fleet_formats` — devices far from the fleet median;
- :mod:`.commands` — the CLI's compare and calibrate.
"""
