"""For an engine, driver or importer that writes or reads the suite's own table: rows (built, and changed, by the
library's one row builder), the run directory, tables read back, the figures the host sets, the system's identity,
and compare's verdict for a driver that judges its own runs."""

from gpubench.compare.defaults import DEFAULT_ALPHA, DEFAULT_THRESHOLD
from gpubench.compare.margin import MIN_RUNS
from gpubench.compare.verdict import BETTER, SAME, judge
from gpubench.machine.fingerprint import identity_hash
from gpubench.results import RUN_FILE, TABLE_SUFFIX, frame, load
from gpubench.results.host_set import set_by_host
from gpubench.results.rundir import RunDir, check_label, ensure_writable, utc_now
from gpubench.run.rows import amend, figure, finish, joined

__all__ = ["BETTER", "DEFAULT_ALPHA", "DEFAULT_THRESHOLD", "MIN_RUNS", "RUN_FILE", "SAME", "TABLE_SUFFIX", "RunDir",
           "amend", "check_label", "ensure_writable", "figure", "finish", "frame", "identity_hash", "joined", "judge",
           "load", "set_by_host", "utc_now"]
