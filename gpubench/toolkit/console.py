"""For a suite's messages and an engine's own output: figures and parameters as the terminal writes them, the
terminal itself and the run's summary tables."""

from gpubench.console import fmt_value, out_console, param_text, summary_tables

__all__ = ["fmt_value", "out_console", "param_text", "summary_tables"]
