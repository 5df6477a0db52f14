"""JUnit XML: one testsuite for the node, one testcase per verdict (classname ``gpubench.check.<check>``, name the
target), so that a CI system shows which check failed on which GPU: FAIL fails, SKIP is skipped, WARN passes
unless ``node.strict``."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from gpubench.check.verdicts import SIMULATED, NodeVerdict, Verdict
from gpubench.check.outputs.common import evidence, finite

# XML 1.0 cannot hold these at all, escaped or not; a check's text quoting a driver's message might carry one.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _x(text: object) -> str:
    return _NOT_XML.sub("?", str(text))


def _fails(v: Verdict, strict: bool) -> bool:
    return v.state == "FAIL" or (strict and v.state == "WARN")


def _case_properties(v: Verdict) -> dict[str, str]:
    """The testcase's machine-readable evidence; numbers in full precision (repr), absent ones left out."""
    props = {"state": v.state, **({SIMULATED: "true"} if v.simulated else {})}
    for name in ("value", "fail_at", "typical", "confidence"):
        f = finite(getattr(v, name))
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


def check(node: NodeVerdict) -> str:
    """The node's testsuite, its properties, and a testcase per verdict."""
    verdicts = node.sorted()
    counts = {"tests": str(len(verdicts)), "failures": str(sum(_fails(v, node.strict) for v in verdicts)),
              "errors": "0", "skipped": str(sum(v.state == "SKIP" for v in verdicts))}
    wall = finite(node.wall_s)
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


__all__ = ["check"]
