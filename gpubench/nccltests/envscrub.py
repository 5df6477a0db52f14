"""What of a process environment (nccl-tests' JSON ``env`` array, a run's own) may be stored: NCCL_* and RCCL_*
settings only, and not those that look like credentials.

The rest of an environment (tokens, keys, home directories, cloud credentials) never reaches a result file.
A setting is dropped when a ``_``-separated word of its name says it holds a secret (KEY, TOKEN, SECRET,
PASSWORD, CREDENTIAL, AUTH, COOKIE, SESSION, PRIVATE, ...; ``NCCL_IB_PKEY``, a partition key, is not one), or
when its value carries a password in a URL (``scheme://user:pass@host``) or a long token-like run (32+
characters of letters, digits and ``+=_-`` mixing letters and digits). NCCL's own settings
(``NCCL_IB_HCA==mlx5_0:1,mlx5_1:1``, ``NCCL_SOCKET_IFNAME=eth0``, ``NCCL_TOPO_FILE=/opt/topo.xml``) pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

PREFIXES = ("NCCL_", "RCCL_")
_SECRET_WORDS = frozenset({
    "KEY", "KEYS", "APIKEY", "TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASS", "PWD",
    "CREDENTIAL", "CREDENTIALS", "CRED", "CREDS", "AUTH", "COOKIE", "SESSION", "PRIVATE", "SIGNATURE"})
_URL_PASSWORD = re.compile(r"://[^/\s:@]+:[^/\s@]+@")
_TOKEN = re.compile(r"[A-Za-z0-9+=_-]{32,}")


def _secret_value(value: str) -> bool:
    if _URL_PASSWORD.search(value):
        return True
    return any(re.search(r"[A-Za-z]", t) and re.search(r"\d", t) for t in _TOKEN.findall(value))


def scrub(env: Iterable[str]) -> dict[str, str]:
    """``["NAME=value", ...]`` → the NCCL_*/RCCL_* settings safe to keep, as a dict."""
    kept = {}
    for entry in env:
        name, sep, value = str(entry).partition("=")
        if not sep or not name.startswith(PREFIXES):
            continue
        if _SECRET_WORDS.intersection(name.upper().split("_")) or _secret_value(value):
            continue
        kept[name] = value
    return dict(sorted(kept.items()))


__all__ = ["PREFIXES", "scrub"]
