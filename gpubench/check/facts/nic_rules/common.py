"""What the NIC rules share: how a verdict on a port or an interface is written."""

from __future__ import annotations

from gpubench.check.verdicts import State, Verdict


def verdict(check: str, target: str, state: State, text: str, title: str, notes: list[str] | None = None,
            **evidence: object) -> Verdict:
    """A fact verdict on ``target`` (``<dev>/<port>`` or an interface name); ``nodes`` is the caller's to fill."""
    return Verdict(check=check, target=target, state=state, text=text, kind="fact", title=title,
                   notes=list(notes or ()), **evidence)


def unknown(why: dict[str, str], *keys: str) -> str:
    """Why the first unknown of ``keys`` is unknown, for a SKIP's text."""
    return next((why[k] for k in keys if k in why), "not readable")
