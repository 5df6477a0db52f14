"""A run's derived rows made again from its measured rows with this checkout's code, in place:

    python3 tests/gpu/rederive.py SUITE RUN_DIR...

For comparing runs taken before a change to how a suite derives its figures (a fit, a ratio, what they carry
beside their samples) with runs taken after it, without measuring them again. The measured rows stay as they were;
each derived row keeps the columns the new code does not set (its run, device, co-tenants) from its old row."""

from __future__ import annotations

import sys

from gpubench import registry, results
from gpubench.run import rows


def main(argv: list[str]) -> int:
    name, runs = argv[0], argv[1:]
    suite = registry.all_suites()[name]()
    for run in runs:
        df = results.load(run)
        old = df[df["suite"] == name].to_dict("records")
        measured = [r for r in old if r.get("stop") != "derived"]
        before = {(r["case"], r["metric"]): r for r in old if r.get("stop") == "derived"}
        made = rows.derive(suite, measured, {})
        for r in made:
            for k, v in before.get((r["case"], r["metric"]), {}).items():
                r.setdefault(k, v)
        results.save(results.frame(measured + made, suite.params), f"{run}/{name}{results.TABLE_SUFFIX}", suite=name)
        print(f"{run}: {len(made)} derived row(s) made again from {len(measured)} measured")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
