from gpubench.cli import entry

entry()
