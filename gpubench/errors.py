"""Errors that reach the user as one line and exit code 2."""


class UsageError(Exception):
    """Bad input from the user: the CLI prints the message as one line and exits 2.

    The message should say what to do, not only what went wrong.
    """
