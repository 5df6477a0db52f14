"""``gpubench check``'s outputs: a terminal view for people, and JSON, JUnit XML and a Prometheus textfile for
machines (docs/schema.md describes the JSON; ``schema.json`` beside this file is its JSON Schema).

The terminal view leads with the node's one-line headline, then one line per GPU (and per GPU pair or node-wide
check that did not pass), worst first, then every verdict that did not pass. JSON holds everything
(:meth:`NodeVerdict.as_dict`); JUnit has one testcase per verdict, so that a CI system shows which check failed
on which GPU; the Prometheus textfile is for node-exporter's textfile collector, so that a fleet's dashboards and
alerts see each node's verdict.
"""

from __future__ import annotations

import io
import json
import math
import numbers
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpubench.results import destination as outputs
from gpubench.check.affinity import describe as binding_text
from gpubench.check.model import SIMULATED, STATES, NodeVerdict, Verdict, target_text, worst
from gpubench.compare.outputs.common import jsonable
from gpubench.console import fmt_value, unit_text
from gpubench.errors import UsageError

FORMATS = ("table", "json", "junit", "prometheus")
SCHEMA_PATH = Path(__file__).resolve().with_name("schema.json")
STYLE: dict[str, str] = {"FAIL": "bold red", "WARN": "yellow", "SKIP": "dim", "PASS": "green"}
# Prometheus: 1 healthy, 0.5 look at it, 0 take it out of service; a node never judged is -1 (no sample would read
# as "no data", which an alert cannot tell from a node-exporter that stopped).
STATUS_VALUE: dict[str, float] = {"PASS": 1.0, "WARN": 0.5, "FAIL": 0.0, "SKIP": -1.0}
_RANK = {s: i for i, s in enumerate(STATES)}
# Within a state: GPUs, then pairs, then node-wide, as NodeVerdict.sorted orders verdicts.
_KIND_RANK = {"gpu": 0, "pair": 1, "node": 2}


# --- what every format says about a verdict ------------------------------------------------------------------

def _finite(x: Any) -> float | None:
    """``x`` as a float, or None where it is missing or not a number people can act on (NaN, inf)."""
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def confidence_text(c: Any) -> str:
    """``99 %``: rounded down, so that 0.996 never reads as a certainty it is not."""
    f = _finite(c)
    if f is None:
        return "—"
    return "100 %" if f >= 1 else f"{math.floor(100 * f + 1e-9):.0f} %"


def _figure(x: Any, unit: str | None) -> str:
    f = _finite(x)
    return "—" if f is None else f"{fmt_value(f)} {unit_text(unit) if unit else ''}".strip()


def evidence(v: Verdict) -> str:
    """The figures behind a verdict in one line (JUnit's system-out and failure body): value, thresholds, peers."""
    parts = [f"{target_text(v)} {v.check}: {v.state} — {v.text}"]
    if _finite(v.value) is not None:
        parts.append(f"value {_figure(v.value, v.unit)}")
    for label, x in (("fail at", v.fail_at), ("warn at", v.warn_at), ("typical", v.typical)):
        if _finite(x) is not None:
            parts.append(f"{label} {_figure(x, v.unit)}")
    if _finite(v.peer_median) is not None:
        parts.append(f"peers' median {_figure(v.peer_median, v.unit)}" + (f" ({v.peers})" if v.peers else ""))
    if v.ci and all(_finite(x) is not None for x in v.ci):
        parts.append(f"95 % interval {fmt_value(v.ci[0])}–{fmt_value(v.ci[1])}")
    if _finite(v.retry) is not None:
        parts.append(f"retry {_figure(v.retry, v.unit)}")
    if v.confidence is not None:
        parts.append(f"confidence {confidence_text(v.confidence)}")
    parts += [f"reference {v.reference}"] if v.reference else []
    parts += [f"run {v.run_dir}"] if v.run_dir else []
    return "; ".join(parts + list(v.notes))


# --- terminal ------------------------------------------------------------------------------------------------

def _kind(v: Verdict) -> str:
    return "pair" if v.pair else "gpu" if v.gpu is not None else "node"


def _targets(node: NodeVerdict) -> list[tuple[str, tuple[int, ...], list[Verdict]]]:
    """(kind, key, verdicts) per line of the first table: every GPU (those the node lists but no check judged
    too: a GPU left out is news), pairs with a verdict that did not pass, node-wide checks; worst first."""
    groups: dict[tuple[str, tuple[int, ...]], list[Verdict]] = {}
    for g in node.gpus:
        if isinstance(g.get("index"), numbers.Integral):
            groups.setdefault(("gpu", (int(g["index"]),)), [])
    for v in node.sorted():
        key = tuple(map(int, v.pair)) if v.pair else (int(v.gpu),) if v.gpu is not None else ()
        groups.setdefault((_kind(v), key), []).append(v)
    lines = [(kind, key, vs) for (kind, key), vs in groups.items()
             if kind != "pair" or any(v.state != "PASS" for v in vs)]
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


def _device(kind: str, key: tuple[int, ...], names: dict[int, str], simulated: bool = False) -> str:
    if kind == "node":
        return f"({SIMULATED})" if simulated else ""
    known = list(dict.fromkeys(names.get(i, "?") for i in key))
    name = "" if known == ["?"] else " / ".join(known)
    return f"{name} ({SIMULATED})".strip() if simulated else name


def _label(kind: str, key: tuple[int, ...]) -> str:
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
    if not node.phases or _finite(node.wall_s) is None:
        return None
    parts = [f"{p.get('what')} {float(p.get('wall_s') or 0):.1f} s" for p in node.phases]
    return f"took {node.wall_s:.1f} s: " + ", ".join(parts)


def terminal(node: NodeVerdict, console: Console) -> None:
    """The headline, the per-GPU table, the verdicts that did not pass, and where the figures come from. Text,
    never markup: a "[" in a check's text is no markup; the state is a word, so the view reads without colour."""
    console.print(Text(node.headline(), style=f"bold {STYLE.get(node.state, '')}".strip()))
    console.print(targets_table(node))
    failing = findings_table(node)
    if failing is not None:
        console.print(failing)
    for line in (bindings_text(node), phases_text(node), run_dirs_text(node)):
        if line:
            console.print(Text(line))


# --- JSON ----------------------------------------------------------------------------------------------------

def to_json(node: NodeVerdict) -> str:
    """The verdict as JSON (``schema.json``): NaN and infinities are null (JSON has none), numpy scalars plain."""
    return json.dumps(jsonable(node.as_dict()), indent=2, allow_nan=False) + "\n"


def load_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of :func:`to_json`'s document."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


# --- JUnit ---------------------------------------------------------------------------------------------------

# XML 1.0 cannot hold these at all, escaped or not; a check's text quoting a driver's message might carry one.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _x(text: Any) -> str:
    return _NOT_XML.sub("?", str(text))


def _fails(v: Verdict, strict: bool) -> bool:
    return v.state == "FAIL" or (strict and v.state == "WARN")


def _case_properties(v: Verdict) -> dict[str, str]:
    """The testcase's machine-readable evidence; numbers in full precision (repr), absent ones left out."""
    props = {"state": v.state, **({SIMULATED: "true"} if v.simulated else {})}
    for name in ("value", "fail_at", "typical", "confidence"):
        f = _finite(getattr(v, name))
        if f is not None:
            props[name] = repr(f)
    if v.unit and any(k in props for k in ("value", "fail_at", "typical")):
        props["unit"] = v.unit
    return props


def _testcase(suite: ET.Element, v: Verdict, strict: bool) -> None:
    tc = ET.SubElement(suite, "testcase", classname=_x(f"gpubench.check.{v.check}"), name=_x(v.target), time="0")
    props = ET.SubElement(tc, "properties")
    for k, val in _case_properties(v).items():
        ET.SubElement(props, "property", name=k, value=_x(val))
    detail = _x(evidence(v))
    if _fails(v, strict):
        ET.SubElement(tc, "failure", message=_x(v.text), type=v.state).text = detail
    elif v.state == "SKIP":
        ET.SubElement(tc, "skipped", message=_x(v.text))
    # A WARN that passes (not --strict) still says why in the CI's log, as a PASS says what it measured.
    if v.state in ("PASS", "WARN"):
        ET.SubElement(tc, "system-out").text = detail


def to_junit(node: NodeVerdict) -> str:
    """One testsuite for the node, one testcase per verdict (classname ``gpubench.check.<check>``, name the
    target): FAIL fails, SKIP is skipped, WARN passes unless ``node.strict``."""
    verdicts = node.sorted()
    counts = {"tests": str(len(verdicts)), "failures": str(sum(_fails(v, node.strict) for v in verdicts)),
              "errors": "0", "skipped": str(sum(v.state == "SKIP" for v in verdicts))}
    wall = _finite(node.wall_s)
    name = _x(f"gpubench check {node.host}")
    root = ET.Element("testsuites", name=name, **counts, time=repr(wall or 0.0))
    suite = ET.SubElement(root, "testsuite", name=name, hostname=_x(node.host), **counts, time=repr(wall or 0.0))
    props = ET.SubElement(suite, "properties")
    for k, val in (("host", node.host), ("state", node.state), ("headline", node.headline()),
                   ("strict", str(node.strict).lower()), ("started", node.started), ("backend", node.backend),
                   (SIMULATED, "true" if node.simulated else None), ("run_dirs", ", ".join(node.run_dirs))):
        if val:
            ET.SubElement(props, "property", name=k, value=_x(val))
    for v in verdicts:
        _testcase(suite, v, node.strict)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# --- Prometheus ----------------------------------------------------------------------------------------------

_LABELS = ("host", "gpu", "pair", "check")
# A simulated node's every sample carries simulated="true": a dashboard or an alert on real nodes can leave it out,
# and nobody reads it as hardware's.
_SIMULATED_LABEL = (SIMULATED,)


def _labels(node: NodeVerdict, v: Verdict) -> list[str]:
    pair = f"{v.pair[0]}-{v.pair[1]}" if v.pair else ""
    return [node.host, "" if v.gpu is None else str(v.gpu), pair, v.check, *(["true"] if node.simulated else [])]


def _unique(node: NodeVerdict) -> Iterator[Verdict]:
    """One verdict per label set, the worst: two samples with one label set make node-exporter drop the whole
    file, and a model that keeps one verdict per check and target never has two."""
    seen: set[tuple[str, ...]] = set()
    for v in node.sorted():
        key = tuple(_labels(node, v))
        if key not in seen:
            seen.add(key)
            yield v


def _families(node: NodeVerdict, now: float) -> list[Any]:
    from prometheus_client.core import GaugeMetricFamily  # an optional dependency: --format prometheus only

    simulated = list(_SIMULATED_LABEL) if node.simulated else []

    def gauge(name: str, doc: str, labels: Iterable[str]) -> Any:
        labels = list(labels)
        # the simulated label goes after the verdict's own (host, gpu, pair, check), before state or unit
        cut = len(_LABELS) if labels[:len(_LABELS)] == list(_LABELS) else len(labels)
        return GaugeMetricFamily(name, doc, labels=[*labels[:cut], *simulated, *labels[cut:]])

    status = gauge("gpubench_check_status", "1 PASS, 0.5 WARN, 0 FAIL (SKIP: no sample)", _LABELS)
    state = gauge("gpubench_check_state", "The verdict's state, one-hot over FAIL, WARN, SKIP, PASS",
                  (*_LABELS, "state"))
    value = gauge("gpubench_check_value", "The figure the check judged, in unit", (*_LABELS, "unit"))
    fail_at = gauge("gpubench_check_fail_at", "The threshold beyond which the figure FAILs, in unit",
                    (*_LABELS, "unit"))
    for v in _unique(node):
        labels = _labels(node, v)
        if v.state != "SKIP":
            status.add_metric(labels, STATUS_VALUE[v.state])
        for s in STATES:
            state.add_metric([*labels, s], float(v.state == s))
        for family, x in ((value, v.value), (fail_at, v.fail_at)):
            if _finite(x) is not None:
                family.add_metric([*labels, v.unit or ""], _finite(x))
    host = [node.host, *(["true"] if simulated else [])]
    node_status = gauge("gpubench_check_node_status", "The node's verdict: 1 PASS, 0.5 WARN, 0 FAIL, -1 SKIP",
                        ["host"])
    node_status.add_metric(host, STATUS_VALUE[node.state])
    stamp = gauge("gpubench_check_timestamp_seconds", "When this file was written (Unix time)", ["host"])
    stamp.add_metric(host, now)
    return [status, state, value, fail_at, node_status, stamp]


class _Families:
    """A collector of families built once (not prometheus_client's Gauge objects, which under
    PROMETHEUS_MULTIPROC_DIR would write to that directory instead of this registry)."""

    def __init__(self, families: list[Any]):
        self._families = families

    def collect(self) -> list[Any]:
        return self._families


def to_prometheus(node: NodeVerdict, path: str) -> None:
    """Write the verdict as a node-exporter textfile at ``path`` (written beside it, then renamed)."""
    try:
        from prometheus_client import CollectorRegistry, write_to_textfile  # optional: --format prometheus only
    except ImportError as e:
        raise UsageError("--format prometheus needs prometheus_client: pip install prometheus-client") from e
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(_families(node, time.time())))
    try:
        write_to_textfile(str(path), registry)
    except OSError as e:
        raise UsageError(f"--report {path}: cannot write it ({e.strerror or e}); choose a file you can write") from e


# --- writing -------------------------------------------------------------------------------------------------

def _to_stdout(out: str | None) -> bool:
    return out is None or out == "-"


def _table_text(node: NodeVerdict) -> str:
    """The terminal view as plain text, for ``--format table --report FILE`` (a log keeps no colour)."""
    console = Console(record=True, width=160, color_system=None, force_terminal=False, file=io.StringIO())
    terminal(node, console)
    return console.export_text()


_WRITERS: dict[str, Callable[[NodeVerdict], str]] = {"json": to_json, "junit": to_junit, "table": _table_text}


def write(node: NodeVerdict, fmt: str, out: str | None, console: Console) -> None:
    """Show or write the verdict: ``table`` on ``console`` (or as plain text to ``out``); ``json`` and ``junit``
    to ``out`` or stdout (``out`` None or ``-``); ``prometheus`` to ``out``, which must end in ``.prom``."""
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt}: choose one of {', '.join(FORMATS)}")
    if fmt == "prometheus":
        if _to_stdout(out) or not str(out).endswith(".prom"):
            raise UsageError("--format prometheus writes a node-exporter textfile: pass --report PATH.prom, in the "
                             "directory of node-exporter's --collector.textfile.directory")
        to_prometheus(node, str(outputs.file(str(out), "--report")))
        return
    if fmt == "table" and _to_stdout(out):
        terminal(node, console)
        return
    text = _WRITERS[fmt](node)
    if _to_stdout(out):
        print(text, end="", flush=True)
    else:
        outputs.write_text(outputs.file(str(out), "--report"), text, "--report")


__all__ = ["FORMATS", "SCHEMA_PATH", "STATUS_VALUE", "STYLE", "terminal", "targets_table", "findings_table",
           "target_text", "confidence_text", "evidence", "to_json", "load_schema", "to_junit", "to_prometheus",
           "write"]
