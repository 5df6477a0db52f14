"""Errors that reach the user as one line and exit code 2, and any exception said in one line."""

# Exit codes: 0 success; 1 a case failed or compare found a regression; 2 bad input; 130 interrupted.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
MAX_LINE = 500  # characters of an exception kept in a row's message or a process's last word


class UsageError(Exception):
    """Bad input from the user: the CLI prints the message as one line and exits 2.

    The message should say what to do, not only what went wrong.
    """


def first_line(e: BaseException, limit: int = MAX_LINE) -> str:
    """An exception in one line: its type and its message's first line."""
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    return (text[0] if text else type(e).__name__)[:limit]
