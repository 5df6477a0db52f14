"""Results as data: the table schema with its version and upgrade chain (:mod:`gpubench.results.schema`), a run
directory on disk, where outputs are written, which figures the host sets, and exports to other tools' formats.

``gpubench.results.load`` / ``save`` and the schema's names are this package's public face. It may import gpubench's
floor modules (errors, units, suite) only.
"""

from gpubench.results.schema import (BODY, COLUMNS, HEAD, META_KEY, RUN_FILE, SCHEMA_VERSION, STATS, STATUSES,
                                     TABLE_SUFFIX, SchemaError, as_list, check_version, frame, load, load_table,
                                     no_complete_run, read_columns, read_run_meta, save, share, upgrade,
                                     why_not_complete)

__all__ = ["SCHEMA_VERSION", "HEAD", "BODY", "COLUMNS", "STATS", "STATUSES", "META_KEY", "RUN_FILE", "TABLE_SUFFIX",
           "SchemaError", "frame", "as_list", "save", "share", "check_version", "upgrade", "load_table", "read_columns",
           "read_run_meta", "no_complete_run", "why_not_complete", "load"]
