"""The gather with a fabric check's verdict among the nodes' own: its WARN and FAIL verdicts fold into the nodes they
name (a link into both ends), never a node of its own; a named node without a check of its own still has its line;
of several fabric verdicts the newest is read, and a note says so. No process is started: the verdicts are written
as the checks write them (NodeVerdict.as_dict)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from gpubench.check import gather
from gpubench.check.outputs import json_
from gpubench.check.verdicts import NodeVerdict, Verdict

NODES = ["node01", "node02", "node03", "node04"]


def _node(root: Path, host: str) -> None:
    doc = NodeVerdict(host=host, started="2026-12-01T00:00:00+00:00", backend="cuda",
                      gpus=[{"index": 0, "name": "H100", "uuid": None, "pci_bus_id": None}],
                      verdicts=[Verdict("hbm", "gpu0", "PASS", "3.0 TB/s", gpu=0, value=3000.0, unit="GB/s",
                                        better="higher", ci=(2990.0, 3010.0))]).as_dict()
    (root / host / "run").mkdir(parents=True)
    (root / host / "run" / "check.json").write_text(json.dumps(doc))


def _fabric(root: Path, verdicts: list[Verdict], run: str = "r1", started: str = "2026-12-01T00:05:00+00:00",
            nodes: int = 4) -> Path:
    """A fabric check's verdict where ``gpubench check --fabric --out ROOT --cluster fabric`` leaves it."""
    everyone = Verdict("fabric_all_reduce", "allocation", "PASS", "118.5 GB/s bus bandwidth", nodes=NODES[:nodes])
    doc = NodeVerdict(host=f"fabric of {nodes} nodes", verdicts=[*verdicts, everyone], started=started,
                      backend="cuda").as_dict()
    path = root / "fabric" / run / "check.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    return path


def _slow_node03() -> list[Verdict]:
    why = "follows from node03, which fails with 2 different partners"
    return [Verdict("fabric_node", "node03", "FAIL", "fails with 2 different partners, passes with none",
                    nodes=["node03"]),
            Verdict("fabric_link", "node01-node03", "FAIL", f"54 GB/s: {why}", nodes=["node03"]),
            Verdict("fabric_link", "node03-node04", "FAIL", f"54 GB/s: {why}", nodes=["node03"]),
            Verdict("fabric_node", "node01", "PASS", "with node02: 135 GB/s", nodes=["node01"]),
            Verdict("fabric_link", "node01-node02", "PASS", "135 GB/s", nodes=["node01", "node02"]),
            Verdict("nic_port", "node02", "SKIP", "no RDMA device under /sys/class/infiniband", kind="fact",
                    nodes=["node02"])]


def test_a_slow_node_of_the_fabric_fails_its_own_line_and_its_partners_stay_as_they_were(tmp_path, monkeypatch,
                                                                                         capsys):
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    for host in NODES:
        _node(tmp_path, host)
    path = _fabric(tmp_path, _slow_node03())
    nodes = gather.gather(tmp_path, "node[01-04]")
    by = {n["host"]: n for n in nodes}
    assert sorted(by) == NODES, "the fabric's verdict is no node of the fleet"
    assert [n["host"] for n in nodes][0] == "node03" and by["node03"]["state"] == "FAIL"
    assert [(f["check"], f["target"]) for f in by["node03"]["fabric"]] == [
        ("fabric_link", "node01-node03"), ("fabric_link", "node03-node04"), ("fabric_node", "node03")]
    for partner in ("node01", "node02", "node04"):  # PASS and SKIP verdicts naming them add nothing
        assert by[partner]["state"] == "PASS" and by[partner]["fabric"] == [], by[partner]
    assert gather.main(str(tmp_path), "table", None, False, "node[01-04]") == 1
    out = capsys.readouterr().out
    assert "fleet " in out and "4 nodes" in out and "1 FAIL, 3 PASS" in out, out
    lines = out.splitlines()
    at = next(i for i, ln in enumerate(lines) if "node node03" in ln)
    below = [ln.strip() for ln in lines[at + 1:at + 12] if ln.strip().startswith("fabric:")]
    assert "fabric: fabric_node FAIL — fails with 2 different partners, passes with none" in below, out
    assert any(ln.startswith("fabric: fabric_link node01-node03 FAIL — 54 GB/s") for ln in below), out
    assert "fabric of" not in out, out
    # The JSON: each node's findings beside its fleet ones, each a verdict as the check's own schema has it.
    assert gather.main(str(tmp_path), "json", None, False, "node[01-04]") == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "gpubench-check-fleet" and doc["fabric_run"] == str(path) and doc["notes"] == []
    schema = json.loads(json_.SCHEMA_PATH.read_text())
    verdict = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": "#/$defs/verdict"}
    found = [f for n in doc["nodes"] for f in n["fabric"]]
    assert len(found) == 3 and all("fleet" in n and "fabric" in n for n in doc["nodes"])
    for f in found:
        jsonschema.validate(f, verdict)


def test_a_slow_link_alone_is_under_both_its_nodes_and_says_it_is_the_link(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    for host in NODES:
        _node(tmp_path, host)
    _fabric(tmp_path, [Verdict("fabric_link", "node01-node04", "FAIL",
                               "40 GB/s: the link, not either node (node01 passes with node02, node04 with node03)",
                               nodes=["node01", "node04"]),
                       Verdict("fabric_nic", "node02:rail1", "WARN", "20 GB/s alone, 70 % of node02's rails' median",
                               nodes=["node02"])])
    by = {n["host"]: n for n in gather.gather(tmp_path)}
    assert {h: by[h]["state"] for h in NODES} == {"node01": "FAIL", "node02": "WARN", "node03": "PASS",
                                                  "node04": "FAIL"}
    assert gather.main(str(tmp_path), "table", None, False) == 1
    out = capsys.readouterr().out
    link = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("fabric: fabric_link node01-node04 FAIL")]
    assert len(link) == 2 and all("the link, not either node" in ln for ln in link), out
    assert any(ln.strip().startswith("fabric: fabric_nic node02:rail1 WARN — 20 GB/s") for ln in out.splitlines())
    # A WARN alone exits 0, as a node's own WARN does; --strict makes it count.
    _fabric(tmp_path, [Verdict("fabric_nic", "node02:rail1", "WARN", "20 GB/s alone", nodes=["node02"])], run="r2",
            started="2026-12-01T00:09:00+00:00")
    assert gather.main(str(tmp_path), "table", None, False) == 0
    assert gather.main(str(tmp_path), "table", None, True) == 1


def test_a_node_named_by_the_fabric_without_a_check_of_its_own_has_its_line(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    for host in NODES[:3]:
        _node(tmp_path, host)
    silent = Verdict("fabric_node", "node04", "FAIL", "silent: no answer within 20 s", nodes=["node04"])
    _fabric(tmp_path, [silent])
    by = {n["host"]: n for n in gather.gather(tmp_path)}  # no nodes expected: only the fabric names node04
    assert by["node04"]["state"] == "FAIL" and by["node04"]["fabric"][0]["text"] == silent.text
    assert "named by the fabric check" in by["node04"]["headline"]
    # Expected and silent: the "no verdict" line, with the fabric's finding under it (one line, not two).
    nodes = gather.gather(tmp_path, "node[01-04]")
    mine = [n for n in nodes if n["host"] == "node04"]
    assert len(mine) == 1 and mine[0]["headline"].startswith("node node04: FAIL — no verdict")
    assert [f["check"] for f in mine[0]["fabric"]] == ["fabric_node"] and mine[0]["expected"] is True
    # Only a fabric verdict under the folder: its nodes, no "no check verdict" refusal.
    alone = tmp_path / "alone"
    _fabric(alone, [silent])
    assert [(n["host"], n["state"]) for n in gather.gather(alone)] == [("node04", "FAIL")]


def test_of_several_fabric_verdicts_the_newest_is_folded_in_and_a_note_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    for host in NODES:
        _node(tmp_path, host)
    # Two runs of the same 4 nodes (one host, "fabric of 4 nodes"), the older written last, and one of 3 nodes.
    newer = _fabric(tmp_path, _slow_node03(), run="b", started="2026-12-01T02:00:00+00:00")
    _fabric(tmp_path, [Verdict("fabric_node", "node02", "FAIL", "older", nodes=["node02"])], run="c",
            started="2026-12-01T01:00:00+00:00")
    _fabric(tmp_path / "elsewhere", [Verdict("fabric_node", "node01", "FAIL", "of 3", nodes=["node01"])],
            started="2026-12-01T00:30:00+00:00", nodes=3)
    nodes, read = gather.gather_fleet(tmp_path)
    by = {n["host"]: n for n in nodes}
    assert by["node03"]["state"] == "FAIL" and by["node02"]["state"] == "PASS" and by["node01"]["state"] == "PASS"
    assert read["fabric_run"] == str(newer)
    assert len(read["notes"]) == 1 and "3 fabric verdicts" in read["notes"][0] and str(newer) in read["notes"][0]
    gather.main(str(tmp_path), "table", None, False)
    assert "note: fabric: 3 fabric verdicts" in capsys.readouterr().out
    # One fabric verdict: no note.
    assert gather.gather_fleet(tmp_path / "elsewhere")[1]["notes"] == []


def test_a_fabric_step_that_left_no_verdict_is_noted(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    for host in NODES:
        _node(tmp_path, host)
    (tmp_path / "fabric.exit").write_text("2\n")  # ci/check-nodes.sbatch's fabric step refused its input
    nodes, read = gather.gather_fleet(tmp_path)
    assert read["fabric_run"] is None and read["notes"] == [
        "fabric: no verdict; its check exited 2 (its output is in the job's log)"]
    gather.main(str(tmp_path), "table", None, False)
    assert "note: fabric: no verdict; its check exited 2" in capsys.readouterr().out
    (tmp_path / "fabric.exit").write_text("0\n")
    assert gather.gather_fleet(tmp_path)[1]["notes"] == []
