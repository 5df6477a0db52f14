"""Imported by every Python started with this folder on PYTHONPATH: counting a run's cases kept
(gpubench.results.rundir.kept, which reads its tables back) takes GPUBENCH_TEST_SLOW_COUNT_S seconds more, as on a slow disk,
so that a launcher's signal lands while a rank counts (tests/test_fleet_edges.py)."""

import importlib.abc
import importlib.util
import os
import sys
import time

_DELAY_S = float(os.environ.get("GPUBENCH_TEST_SLOW_COUNT_S") or 0)


class _SlowCount(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "gpubench.results.rundir":
            return None
        sys.meta_path.remove(self)  # once: the module's own spec, found as it would be without this finder
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            real = module.kept

            def kept(path):
                time.sleep(_DELAY_S)
                return real(path)

            module.kept = kept

        spec.loader.exec_module = exec_module
        return spec


if _DELAY_S > 0:
    sys.meta_path.insert(0, _SlowCount())
