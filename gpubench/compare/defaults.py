"""compare's defaults, in a module that imports nothing: the command line states them in its help without loading
what compare computes with (pandas, scipy)."""

DEFAULT_WINDOW = 5  # baseline runs taken from a directory of runs when --baseline-window is not given
DEFAULT_ALPHA = 0.01  # the rank test's significance level
DEFAULT_THRESHOLD = 0.05  # the smallest change called WORSE or BETTER, and the fleet's practical floor
DEFAULT_K = 3.0  # the fleet view's robust standard deviations
# calibrate: a case's threshold is its run spread × DEFAULT_SAFETY, at least DEFAULT_FLOOR; above
# DEFAULT_MAX_THRESHOLD it is not gated
DEFAULT_SAFETY, DEFAULT_FLOOR, DEFAULT_MAX_THRESHOLD = 2.0, 0.01, 0.25
