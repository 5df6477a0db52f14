"""The terminal view of ``gpubench check`` (the default, ``--format table``), for people: the node's one-line
headline, then one line per GPU (and per GPU pair or node-wide check that did not pass), worst first, then every
verdict that did not pass, then where the figures come from. With ``--report FILE`` the same view as plain text."""

from __future__ import annotations

import numbers
from typing import Any

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from gpubench.check.affinity import describe as binding_text
from gpubench.check.verdicts import SIMULATED, STATES, NodeVerdict, Verdict, target_text, worst
from gpubench.check.outputs.common import confidence_text, finite

CONSOLE = True
STYLE: dict[str, str] = {"FAIL": "bold red", "WARN": "yellow", "SKIP": "dim", "PASS": "green"}
_RANK = {s: i for i, s in enumerate(STATES)}
# Within a state: GPUs, then pairs, then node-wide, as NodeVerdict.sorted orders verdicts.
_KIND_RANK = {"gpu": 0, "pair": 1, "node": 2, "host": 3, "link": 4, "fabric": 5}



def _kind(v: Verdict) -> str:
    if v.nodes:  # the fabric check's: a node (its NICs too), a link between two, the whole allocation
        return "host" if len(v.nodes) == 1 else "link" if len(v.nodes) == 2 and v.check != "fabric_all_reduce" \
            else "fabric"
    return "pair" if v.pair else "gpu" if v.gpu is not None else "node"


def _key(v: Verdict) -> tuple:
    if v.nodes:
        return tuple(v.nodes) if _kind(v) != "fabric" else ()
    return tuple(map(int, v.pair)) if v.pair else (int(v.gpu),) if v.gpu is not None else ()


def _targets(node: NodeVerdict) -> list[tuple[str, tuple, list[Verdict]]]:
    """(kind, key, verdicts) per line of the first table: every GPU (those the node lists but no check judged
    too: a GPU left out is news), pairs with a verdict that did not pass, node-wide checks; worst first."""
    groups: dict[tuple[str, tuple], list[Verdict]] = {}
    for g in node.gpus:
        if isinstance(g.get("index"), numbers.Integral):
            groups.setdefault(("gpu", (int(g["index"]),)), [])
    for v in node.sorted():
        groups.setdefault((_kind(v), _key(v)), []).append(v)
    lines = [(kind, key, vs) for (kind, key), vs in groups.items()
             if kind not in ("pair", "link") or any(v.state != "PASS" for v in vs)]
    return sorted(lines, key=lambda t: (_RANK[worst(v.state for v in t[2])], _KIND_RANK[t[0]], t[1]))


def _findings(verdicts: list[Verdict]) -> str:
    """The worst of a target's verdicts in words: what failed or warned; else how many passed (and skipped);
    else, where nothing was judged, why."""
    bad = [f"{v.check}: {v.text}" for v in verdicts if v.state in ("FAIL", "WARN")]
    if bad:
        return "; ".join(bad)
    passed = sum(v.state == "PASS" for v in verdicts)
    skipped = [v for v in verdicts if v.state == "SKIP"]
    if passed:
        n = "check" if passed == 1 else "checks"
        return f"{passed} passed, {len(skipped)} skipped" if skipped else f"all {passed} {n} passed"
    if not verdicts:
        return "no check judged it"
    return "; ".join(dict.fromkeys(f"{v.check}: {v.text}" for v in skipped))  # a reason said once


def _device_names(node: NodeVerdict) -> dict[int, str]:
    return {int(g["index"]): str(g["name"]) for g in node.gpus
            if isinstance(g.get("index"), numbers.Integral) and g.get("name")}


def _device(kind: str, key: tuple, names: dict[int, str], simulated: bool = False) -> str:
    if kind not in ("gpu", "pair"):
        return f"({SIMULATED})" if simulated else ""
    known = list(dict.fromkeys(names.get(i, "?") for i in key))
    name = "" if known == ["?"] else " / ".join(known)
    return f"{name} ({SIMULATED})".strip() if simulated else name


def _label(kind: str, key: tuple) -> str:
    if kind in ("host", "link", "fabric"):
        return "-".join(key) or "allocation"
    if kind == "pair":
        return f"GPUs {key[0]}↔{key[1]}"
    return f"GPU {key[0]}" if kind == "gpu" else "node"


def _state(state: str) -> Text:
    return Text(state, style=STYLE.get(state, ""))


def _table(*columns: str) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title_justify="left")
    for c in columns:
        # Texts fold rather than being cut with an ellipsis: a finding cut short could say the opposite.
        table.add_column(c, overflow="fold", no_wrap=c in ("state", "confidence"))
    return table


def targets_table(node: NodeVerdict) -> Table:
    """One line per GPU (and failing pair, and the node's own checks): target, state, device, worst findings."""
    names = _device_names(node)
    table = _table("target", "state", "device", "findings")
    for kind, key, verdicts in _targets(node):
        state = worst(v.state for v in verdicts)
        table.add_row(Text(_label(kind, key)), _state(state), Text(_device(kind, key, names, node.simulated)),
                      Text(_findings(verdicts)))
    return table


def findings_table(node: NodeVerdict) -> Table | None:
    """Every verdict that did not pass, worst first; None when every one passed."""
    shown = [v for v in node.sorted() if v.state != "PASS"]
    if not shown:
        return None
    table = _table("check", "target", "state", "text", "confidence")
    table.title = "not passed (worst first)"
    for v in shown:
        table.add_row(Text(v.check), Text(target_text(v)), _state(v.state), Text(v.text),
                      Text(confidence_text(v.confidence)))
    return table


def run_dirs_text(node: NodeVerdict) -> str:
    if not node.run_dirs:
        return "run directories: none (nothing was measured)"
    return ("run directory: " if len(node.run_dirs) == 1 else "run directories: ") + ", ".join(node.run_dirs)


def bindings_text(node: NodeVerdict) -> str | None:
    """Where each GPU's measuring process ran: ``measured on: GPU 0 CPUs 0-55 (NUMA node 0); ...`` (None: unknown)."""
    known = [g for g in node.gpus if isinstance(g.get("binding"), dict)]
    if not known:
        return None
    texts = [binding_text(g["binding"]) for g in known]
    if len(set(texts)) == 1 and not known[0]["binding"].get("bound"):
        return f"measuring processes {texts[0]}"
    return "measuring processes: " + "; ".join(f"GPU {g['index']} on {t}" if g["binding"].get("bound")
                                               else f"GPU {g['index']} {t}" for g, t in zip(known, texts))


def phases_text(node: NodeVerdict) -> str | None:
    """``took 41.2 s: start 6.0 s, devices 9.1 s, turns 7.3 s, node 2.0 s, pairs round 1 2.9 s, ...``."""
    if not node.phases or finite(node.wall_s) is None:
        return None
    parts = [f"{p.get('what')} {float(p.get('wall_s') or 0):.1f} s" for p in node.phases]
    return f"took {node.wall_s:.1f} s: " + ", ".join(parts)


def check(node: NodeVerdict) -> Group:
    """The headline, the per-GPU table, the verdicts that did not pass, and where the figures come from. Text,
    never markup: a "[" in a check's text is no markup; the state is a word, so the view reads without colour."""
    parts: list[Any] = [Text(node.headline(), style=f"bold {STYLE.get(node.state, '')}".strip()), targets_table(node)]
    failing = findings_table(node)
    if failing is not None:
        parts.append(failing)
    parts += [Text(line) for line in (bindings_text(node), phases_text(node), run_dirs_text(node)) if line]
    return Group(*parts)


__all__ = ["check", "targets_table", "findings_table", "STYLE", "CONSOLE"]
