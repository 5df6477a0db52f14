"""gpubench check's outputs (gpubench/check/outputs/): the terminal view, JSON against its schema, JUnit,
the Prometheus textfile and write(), on node verdicts built here by hand."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import re
import sys
import time
import xml.etree.ElementTree as ET

import pytest
from jsonschema import Draft202012Validator
from junitparser import Failure, JUnitXml, Skipped
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from gpubench.check import outputs
from gpubench.check.outputs import common, json_, junit, prometheus, table
from gpubench.check.verdicts import NodeVerdict, Verdict
from gpubench.errors import UsageError

H100 = "NVIDIA H100 80GB HBM3"


def verdicts() -> list[Verdict]:
    """Every state, GPU, pair and node targets, a NaN value, a None value, a NaN in an interval."""
    return [
        Verdict("hbm", "gpu0", "PASS", "3.35 TB/s, 100 % of typical", gpu=0, value=3350.0, unit="GB/s",
                better="higher", fail_at=2850.0, warn_at=3000.0, typical=3350.0, confidence=1.0,
                ci=(3340.0, 3360.0), run_dir="/runs/a"),
        Verdict("hbm", "gpu1", "PASS", "3.3 TB/s", gpu=1, value=math.nan, unit="GB/s"),
        Verdict("gemm_bf16", "gpu1", "SKIP", "needs triton: pip install triton", gpu=1),
        Verdict("hbm", "gpu3", "FAIL", "2.21 TB/s, 66 % of spec (floor 2.85)", gpu=3, value=2210.0, unit="GB/s",
                better="higher", fail_at=2850.0, warn_at=3000.0, typical=3350.0, confidence=0.996,
                ci=(2200.0, math.nan), peer_median=3340.0, peers=3, run_dir="/runs/a"),
        Verdict("ecc", "gpu0", "WARN", "12 corrected [sram] errors", kind="fact", gpu=0, value=12.0, unit="errors"),
        Verdict("p2p", "gpu0-gpu1", "FAIL", "12 GB/s, PCIe fallback", pair=(0, 1), value=12.0, unit="GB/s",
                fail_at=100.0, confidence=0.5),
        Verdict("p2p", "gpu2-gpu3", "PASS", "300 GB/s", pair=(2, 3), value=300.0, unit="GB/s"),
        Verdict("nvlink", "node", "WARN", "one NVLink down", kind="fact", value=None),
    ]


def make_node(vs: list[Verdict] | None = None, strict: bool = False, host: str = "node-a") -> NodeVerdict:
    return NodeVerdict(host, verdicts() if vs is None else vs,
                       gpus=[{"index": i, "name": H100, "uuid": f"GPU-{i}", "pci_bus_id": f"0000:0{i}:00.0"}
                             for i in range(4)],
                       run_dirs=["/runs/a", "/runs/b"], started="2026-11-25T10:00:00+00:00", wall_s=42.5,
                       backend="cuda", argv=["check"], strict=strict)


def render(node: NodeVerdict, width: int) -> str:
    console = Console(record=True, width=width, force_terminal=True, color_system="standard", file=io.StringIO())
    console.print(table.check(node))
    return console.export_text()


def target_lines(text: str) -> list[str]:
    """The first table's targets, top to bottom (its lines that start a row; a wrapped cell's lines start blank)."""
    table = text.split("─\n", 1)[1].split("not passed")[0]
    return [m.group(0) for m in re.finditer(r"^(GPUs \d+↔\d+|GPU \d+|node)(?= )", table, re.MULTILINE)]


def validator() -> Draft202012Validator:
    schema = json_.load_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


# --- JSON ----------------------------------------------------------------------------------------------------

def test_json_validates_against_its_schema_with_nan_as_null():
    text = json_.check(make_node())
    assert "NaN" not in text and "Infinity" not in text
    doc = json.loads(text)
    validator().validate(doc)
    assert doc["format"] == "gpubench-check" and doc["state"] == "FAIL"
    assert doc["counts"] == {"FAIL": 2, "WARN": 2, "SKIP": 1, "PASS": 3}
    by = {(v["check"], v["target"]): v for v in doc["verdicts"]}
    assert by[("hbm", "gpu1")]["value"] is None  # NaN
    assert by[("hbm", "gpu3")]["ci"] == [2200.0, None]
    assert by[("p2p", "gpu0-gpu1")]["pair"] == [0, 1]
    assert [v["state"] for v in doc["verdicts"]][:2] == ["FAIL", "FAIL"]  # worst first


def test_json_of_a_node_with_no_verdict_or_every_one_skipped_validates():
    for vs in ([], [Verdict("hbm", "gpu0", "SKIP", "no GPU", gpu=0)]):
        doc = json.loads(json_.check(make_node(vs)))
        validator().validate(doc)
        assert doc["state"] == "SKIP"


def test_schema_names_exactly_the_fields_the_model_writes():
    # A field added to the model without the schema (or the other way round) fails here, not in a user's tool.
    schema = json_.load_schema()
    assert set(schema["required"]) == set(schema["properties"]) == set(make_node().as_dict())
    verdict = schema["$defs"]["verdict"]
    assert set(verdict["required"]) == set(verdict["properties"]) == {f.name for f in dataclasses.fields(Verdict)}
    assert json_.SCHEMA_PATH.name == "schema.json" and json_.SCHEMA_PATH.is_file()


@pytest.mark.parametrize("spoil", [
    lambda d: d["verdicts"][0].update(state="BROKEN"),
    lambda d: d["verdicts"][0].update(kind="opinion"),
    lambda d: d.update(state="OK"),
    lambda d: d["verdicts"][0].pop("text"),
    lambda d: d["verdicts"][0].update(surprise=1),
    lambda d: d["verdicts"][0].update(pair=[0]),
    lambda d: d["counts"].pop("SKIP"),
    lambda d: d.update(version=6),
    lambda d: d.update(version=4),
    lambda d: d["verdicts"][0].update(nodes=[""]),
    lambda d: d["verdicts"][0].pop("nodes"),
    lambda d: d["verdicts"][0].update(host_set=""),
    lambda d: d["verdicts"][0].update(host_pace=0),
    lambda d: d["verdicts"][0].pop("measured"),
    lambda d: d["verdicts"][0].pop("simulated"),
    lambda d: d.update(simulated="yes"),
])
def test_schema_rejects_a_document_that_breaks_it(spoil):
    doc = json.loads(json_.check(make_node()))
    spoil(doc)
    assert list(validator().iter_errors(doc))


# --- JUnit ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("strict, failures", [(False, 2), (True, 4)])
def test_junit_counts_fail_skip_and_warn_by_strict(strict, failures):
    text = junit.check(make_node(strict=strict))
    xml = JUnitXml.fromstring(text)
    suites = list(xml) if isinstance(xml, JUnitXml) else [xml]
    assert len(suites) == 1
    suite = suites[0]
    assert suite.name == "gpubench check node-a"
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (8, failures, 0, 1)
    cases = {(c.classname, c.name): c for c in suite}
    assert len(cases) == 8
    hbm3 = cases[("gpubench.check.hbm", "gpu3")]
    assert isinstance(hbm3.result[0], Failure) and hbm3.result[0].type == "FAIL"
    assert hbm3.result[0].message == "2.21 TB/s, 66 % of spec (floor 2.85)"
    skip = cases[("gpubench.check.gemm_bf16", "gpu1")]
    assert isinstance(skip.result[0], Skipped) and skip.result[0].message == "needs triton: pip install triton"
    ecc = cases[("gpubench.check.ecc", "gpu0")]
    if strict:
        assert isinstance(ecc.result[0], Failure) and ecc.result[0].type == "WARN"
    else:
        assert ecc.is_passed
    assert "12 corrected [sram] errors" in ecc.system_out  # a WARN says why either way
    assert cases[("gpubench.check.p2p", "gpu2-gpu3")].is_passed
    assert "300 GB/s" in cases[("gpubench.check.p2p", "gpu2-gpu3")].system_out


def test_junit_properties_carry_the_evidence_where_present():
    root = ET.fromstring(junit.check(make_node()))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("failures") == "2" and suite.get("skipped") == "1"
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["state"] == "FAIL" and props["host"] == "node-a"

    def case_props(classname: str, name: str) -> dict[str, str]:
        tc = suite.find(f"testcase[@classname='{classname}'][@name='{name}']")
        return {p.get("name"): p.get("value") for p in tc.find("properties")}

    assert case_props("gpubench.check.hbm", "gpu3") == {"state": "FAIL", "value": "2210.0", "unit": "GB/s",
                                                         "fail_at": "2850.0", "typical": "3350.0",
                                                         "confidence": "0.996"}
    assert case_props("gpubench.check.hbm", "gpu1") == {"state": "PASS"}  # NaN value: left out, and its unit
    assert case_props("gpubench.check.nvlink", "node") == {"state": "WARN"}


def test_junit_holds_text_xml_cannot():
    vs = [Verdict("ecc", "gpu0", "FAIL", "driver said \x07<bad> & \"worse\"", gpu=0)]
    root = ET.fromstring(junit.check(make_node(vs)))
    assert root.find("testsuite/testcase/failure").get("message") == 'driver said ?<bad> & "worse"'


# --- Prometheus ----------------------------------------------------------------------------------------------

def scrape(node: NodeVerdict, tmp_path) -> dict[str, list]:
    path = tmp_path / "gpubench.prom"
    prometheus.write(node, str(path))
    families = {f.name: f.samples for f in text_string_to_metric_families(path.read_text())}
    for samples in families.values():
        assert all(math.isfinite(s.value) for s in samples)  # no NaN sample, ever
    return families


def by_labels(samples, **fixed) -> dict[tuple, float]:
    return {(s.labels["check"], s.labels["gpu"], s.labels["pair"]): s.value for s in samples
            if all(s.labels.get(k) == v for k, v in fixed.items())}


def test_prometheus_status_state_values_and_node(tmp_path):
    before = time.time()
    m = scrape(make_node(), tmp_path)
    status = by_labels(m["gpubench_check_status"], host="node-a")
    assert status == {("hbm", "0", ""): 1.0, ("hbm", "1", ""): 1.0, ("hbm", "3", ""): 0.0, ("ecc", "0", ""): 0.5,
                      ("p2p", "", "0-1"): 0.0, ("p2p", "", "2-3"): 1.0, ("nvlink", "", ""): 0.5}  # no SKIP
    states = m["gpubench_check_state"]
    assert len(states) == 8 * 4
    ones = {(s.labels["check"], s.labels["gpu"], s.labels["pair"]): s.labels["state"] for s in states if s.value == 1}
    assert len(ones) == 8 and ones[("gemm_bf16", "1", "")] == "SKIP" and ones[("hbm", "3", "")] == "FAIL"
    assert sum(s.value for s in states) == 8  # one-hot: one state per verdict
    values = {k: (v, s.labels["unit"]) for s in m["gpubench_check_value"]
              for k, v in [((s.labels["check"], s.labels["gpu"], s.labels["pair"]), s.value)]}
    assert values[("hbm", "3", "")] == (2210.0, "GB/s") and values[("p2p", "", "0-1")] == (12.0, "GB/s")
    assert ("hbm", "1", "") not in values and ("nvlink", "", "") not in values  # NaN, None: no sample
    assert by_labels(m["gpubench_check_fail_at"]) == {("hbm", "0", ""): 2850.0, ("hbm", "3", ""): 2850.0,
                                                      ("p2p", "", "0-1"): 100.0}
    assert [(s.labels, s.value) for s in m["gpubench_check_node_status"]] == [({"host": "node-a"}, 0.0)]
    (stamp,) = m["gpubench_check_timestamp_seconds"]
    assert stamp.labels == {"host": "node-a"} and before - 1 <= stamp.value <= time.time() + 1


@pytest.mark.parametrize("vs, expected", [
    ([Verdict("hbm", "gpu0", "PASS", "ok", gpu=0)], 1.0),
    ([Verdict("hbm", "gpu0", "PASS", "ok", gpu=0), Verdict("ecc", "gpu0", "WARN", "w", gpu=0)], 0.5),
    ([Verdict("hbm", "gpu0", "SKIP", "no GPU", gpu=0)], -1.0),
    ([], -1.0),
])
def test_prometheus_node_status(tmp_path, vs, expected):
    (sample,) = scrape(make_node(vs), tmp_path)["gpubench_check_node_status"]
    assert sample.value == expected


def test_prometheus_keeps_one_series_per_label_set_the_worst(tmp_path):
    vs = [Verdict("hbm", "gpu0", "PASS", "ok", gpu=0), Verdict("hbm", "gpu0", "FAIL", "slow", gpu=0)]
    m = scrape(make_node(vs), tmp_path)
    assert [s.value for s in m["gpubench_check_status"]] == [0.0]
    assert sum(s.value for s in m["gpubench_check_state"]) == 1


def test_prometheus_without_the_client_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import fails as if not installed
    with pytest.raises(UsageError, match="pip install prometheus-client"):
        prometheus.write(make_node(), str(tmp_path / "x.prom"))


# --- terminal ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("width", [100, 60])
def test_terminal_headline_first_then_targets_worst_first(width):
    node = make_node()
    text = render(node, width)
    lines = text.splitlines()
    assert " ".join(text.split()).startswith(" ".join(node.headline().split()))  # however it wraps
    assert lines[0].startswith("node node-a: FAIL")
    assert target_lines(text) == ["GPU 3", "GPUs 0↔1", "GPU 0", "node", "GPU 2", "GPU 1"]  # FAIL FAIL WARN WARN
    # SKIP (a GPU the node lists that no check judged) PASS
    assert "GPUs 2↔3" not in text.split("not passed")[0]  # a pair that passed has no line
    assert "[sram]" in text  # a check's text is never markup
    assert "run directories: /runs/a, /runs/b" in " ".join(text.split())
    assert all(len(line) <= width for line in lines)


def test_terminal_lines_say_device_findings_and_confidence():
    text = render(make_node(), 140)
    line = {ln.split("  ")[0].strip(): ln for ln in text.splitlines()}
    assert H100 in line["GPU 3"] and "hbm: 2.21 TB/s, 66 % of spec (floor 2.85)" in line["GPU 3"]
    assert "1 passed, 1 skipped" in line["GPU 1"]
    assert "no check judged it" in line["GPU 2"]
    failing = text.split("not passed (worst first)")[1].splitlines()
    rows = [ln.split()[0] for ln in failing if ln.strip() and not ln.startswith(("check", "─", "run"))]
    assert rows == ["hbm", "p2p", "ecc", "nvlink", "gemm_bf16"]
    hbm = next(ln for ln in failing if ln.startswith("hbm"))
    assert hbm.rstrip().endswith("99 %")  # 0.996 rounds down, never to a certainty
    assert next(ln for ln in failing if ln.startswith("ecc")).rstrip().endswith("—")


def test_terminal_when_every_check_passed():
    vs = [Verdict("hbm", "gpu0", "PASS", "ok", gpu=0), Verdict("gemm_bf16", "gpu0", "PASS", "ok", gpu=0)]
    node = make_node(vs)
    node.gpus, node.run_dirs = node.gpus[:1], []
    text = render(node, 80)
    assert text.splitlines()[0] == "node node-a: PASS — 2 checks passed"
    assert "all 2 checks passed" in text and "not passed" not in text
    assert "run directories: none" in text


def test_confidence_text():
    assert [common.confidence_text(c) for c in (None, math.nan, 1.0, 0.996, 0.29, 0.5)] == \
        ["—", "—", "100 %", "99 %", "29 %", "50 %"]


# --- write ---------------------------------------------------------------------------------------------------

def test_write_json_and_junit_to_files(tmp_path):
    node = make_node()
    console = Console(record=True, width=100)
    outputs.write(node, "json", str(tmp_path / "v.json"), console)
    outputs.write(node, "junit", str(tmp_path / "v.xml"), console)
    validator().validate(json.loads((tmp_path / "v.json").read_text()))
    assert ET.parse(tmp_path / "v.xml").getroot().find("testsuite").get("tests") == "8"
    assert console.export_text() == ""  # a file written says nothing on the console
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.json", "v.xml"]  # no temp file left


@pytest.mark.parametrize("out", [None, "-"])
def test_write_json_and_junit_to_stdout(capsys, out):
    node = make_node()
    outputs.write(node, "json", out, Console(record=True))
    assert json.loads(capsys.readouterr().out)["host"] == "node-a"
    outputs.write(node, "junit", out, Console(record=True))
    assert ET.fromstring(capsys.readouterr().out).get("failures") == "2"


def test_write_table_to_console_and_to_file(tmp_path):
    console = Console(record=True, width=100)
    outputs.write(make_node(), "table", None, console)
    assert console.export_text().startswith("node node-a: FAIL")
    outputs.write(make_node(), "table", str(tmp_path / "v.txt"), console)
    text = (tmp_path / "v.txt").read_text()
    assert text.startswith("node node-a: FAIL") and "\x1b" not in text


def test_write_prometheus(tmp_path):
    path = tmp_path / "gpubench.prom"
    outputs.write(make_node(), "prometheus", str(path), Console(record=True))
    names = {f.name for f in text_string_to_metric_families(path.read_text())}
    assert "gpubench_check_node_status" in names
    assert [p.name for p in tmp_path.iterdir()] == ["gpubench.prom"]


@pytest.mark.parametrize("out", [None, "-", "metrics.txt"])
def test_write_prometheus_needs_a_prom_path(tmp_path, out):
    with pytest.raises(UsageError, match=r"--report PATH\.prom") as e:
        outputs.write(make_node(), "prometheus", out if out in (None, "-") else str(tmp_path / out),
                      Console(record=True))
    assert "\n" not in str(e.value)


def test_write_refuses_an_unknown_format_and_a_missing_folder(tmp_path):
    with pytest.raises(UsageError, match="table, json, junit, prometheus"):
        outputs.write(make_node(), "yaml", None, Console(record=True))
    with pytest.raises(UsageError, match="does not exist"):
        outputs.write(make_node(), "json", str(tmp_path / "nowhere" / "v.json"), Console(record=True))
    with pytest.raises(UsageError, match="does not exist"):
        outputs.write(make_node(), "prometheus", str(tmp_path / "nowhere" / "v.prom"), Console(record=True))


# --- a new format --------------------------------------------------------------------------------------------

NEW_FORMAT = '''
def check(node):
    return f"host: {node.host}\\nstate: {node.state}\\n"
'''
NEW_FILE_FORMAT = '''
SUFFIXES = (".tsv",)
FILE_ONLY = "--format tsv is a file: add --report PATH.tsv"


def check(node):
    return "host\\tstate\\n"
'''


def test_a_new_format_is_one_file(tmp_path, monkeypatch, capsys):
    from gpubench.cli import build_parser

    folder = tmp_path / "formats"
    folder.mkdir()
    (folder / "yaml.py").write_text(NEW_FORMAT)
    (folder / "tsv.py").write_text(NEW_FILE_FORMAT)
    monkeypatch.setattr(outputs, "__path__", [*outputs.__path__, str(folder)])
    for name in ("yaml", "tsv"):
        monkeypatch.delitem(sys.modules, f"gpubench.check.outputs.{name}", raising=False)
    try:
        assert build_parser("check").parse_args(["check", "--format", "yaml"]).format == "yaml"
        outputs.write(make_node(), "yaml", None, Console(record=True))
        assert capsys.readouterr().out == "host: node-a\nstate: FAIL\n"
        with pytest.raises(UsageError, match="add --report PATH.tsv"):
            outputs.check_report("tsv", None)
        outputs.write(make_node(), "tsv", str(tmp_path / "v.tsv"), Console(record=True))
        assert (tmp_path / "v.tsv").read_text() == "host\tstate\n"
    finally:
        for name in ("yaml", "tsv"):
            sys.modules.pop(f"gpubench.check.outputs.{name}", None)
