"""Built-in suites, one module each (installed as ``gpubench.suites``). Modules starting with ``_`` are
helpers, not suites."""
