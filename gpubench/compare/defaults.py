"""compare's and calibrate's defaults, in a module that imports nothing: the command line shows them in its
``--help`` without loading pandas (the modules that use them import them from here)."""

DEFAULT_WINDOW = 5  # baseline runs taken from a directory of runs when --baseline-window is not given
DEFAULT_ALPHA = 0.01  # significance level of the rank test on the samples
DEFAULT_K = 3.0  # --fleet: a device beyond K robust standard deviations from the fleet median is flagged
FORMATS = ("terminal", "markdown", "junit", "json")
SUFFIXES = {".md": "markdown", ".markdown": "markdown", ".xml": "junit", ".json": "json"}
# calibrate: the observed spread × SAFETY, at least FLOOR; a case whose threshold would exceed MAX_THRESHOLD is not
# gated.
DEFAULT_SAFETY = 2.0
DEFAULT_FLOOR = 0.01
DEFAULT_MAX_THRESHOLD = 0.25
