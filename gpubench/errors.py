"""Errors that reach the user as one line and exit code 2, and any exception said in one line."""

import os

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


def say_error(message: str) -> None:
    """``gpubench: error: MESSAGE`` on standard error in one write: the ranks of one step that refuse the same input
    at once share the launcher's stream, and a print's two writes (the text, then its newline) ran two lines
    together."""
    import sys

    line = f"gpubench: error: {message}\n"
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a stream of no file (a test's capture): one write to it
        sys.stderr.write(line)
        sys.stderr.flush()
        return
    sys.stderr.flush()
    os.write(fd, line.encode())
