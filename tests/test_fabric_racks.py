"""Which rack a node is in: Slurm's topology.conf, two-column files, and SLURM_TOPOLOGY_ADDR."""

from __future__ import annotations

import pytest

from gpubench.check.fabric import racks
from gpubench.errors import UsageError

# The shape of a two-level fat tree as Slurm's documentation and ib2slurm write it: leaves with nodes, spines above.
TOPOLOGY_CONF = """\
# topology.conf for the H100 partition
# spine level
SwitchName=spine0 Switches=leaf[1-3] LinkSpeed=400
switchname=spine1 switches=leaf[1-3]   # parameter names in any case

# leaf switches, 16 nodes each but the last
SwitchName=leaf1 Nodes=gpu[01-16] LinkSpeed=400
SwitchName=leaf2 Nodes=gpu[17-32]
SwitchName=leaf3 Nodes=gpu[33-35],gpu40 # a short rack
"""


def test_a_real_looking_topology_conf(tmp_path):
    path = tmp_path / "topology.conf"
    path.write_text(TOPOLOGY_CONF)
    rack_of = racks.from_file(path)
    assert len(rack_of) == 36
    assert rack_of["gpu01"] == rack_of["gpu16"] == "leaf1"
    assert rack_of["gpu17"] == "leaf2" and rack_of["gpu40"] == "leaf3"
    assert "spine0" not in rack_of.values()


def test_the_block_plugin_names_racks_too(tmp_path):
    path = tmp_path / "topology.conf"
    path.write_text("BlockName=nvl0 Nodes=gb[001-018]\nBlockName=nvl1 Nodes=gb[019-036]\nBlockSizes=18,36\n")
    rack_of = racks.from_file(path)
    assert rack_of["gb018"] == "nvl0" and rack_of["gb019"] == "nvl1" and len(rack_of) == 36


def test_a_two_column_file(tmp_path):
    path = tmp_path / "racks.txt"
    path.write_text("# node rack\nnode01 r1\nnode02   r1  # same rack\n\nnode[03-04] r2\n")
    assert racks.from_file(path) == {"node01": "r1", "node02": "r1", "node03": "r2", "node04": "r2"}


@pytest.mark.parametrize("text,line,says", [
    ("node01 r1\nnode02\n", 2, "1 words where 'node rack' has two"),
    ("SwitchName=leaf1 Nodes=gpu[01-04\n", 1, "without its ']'"),
    ("Nodes=gpu[01-04]\n", 1, "Nodes= without the SwitchName="),
    ("SwitchName=a Nodes=n1\n# x\nSwitchName=b Nodes=n[1-2]\n", 3, "n1 is in a already (line 1), here in b"),
    ("SwitchName=leaf1 Nodes\n", 1, "'Nodes' is not a Key=value"),
])
def test_a_bad_line_names_the_file_and_the_line(tmp_path, text, line, says):
    path = tmp_path / "topology.conf"
    path.write_text(text)
    with pytest.raises(UsageError) as e:
        racks.from_file(path)
    message = str(e.value)
    assert f"{path}, line {line}: " in message and says in message and "\n" not in message


def test_a_file_that_names_no_rack_or_is_not_there(tmp_path):
    path = tmp_path / "topology.conf"
    path.write_text("# only the spine\nSwitchName=spine Switches=leaf[1-2]\n")
    with pytest.raises(UsageError, match="names no node's rack"):
        racks.from_file(path)
    with pytest.raises(UsageError, match="cannot read the topology file .*nothing.conf"):
        racks.from_file(tmp_path / "nothing.conf")


@pytest.mark.parametrize("env,rack", [
    ({"SLURM_TOPOLOGY_ADDR": "spine0.leaf3.gpu07", "SLURM_TOPOLOGY_ADDR_PATTERN": "switch.switch.node"}, "leaf3"),
    ({"SLURM_TOPOLOGY_ADDR": "leaf3.gpu07", "SLURM_TOPOLOGY_ADDR_PATTERN": "switch.node"}, "leaf3"),
    ({"SLURM_TOPOLOGY_ADDR": "spine0.leaf3.gpu07"}, "leaf3"),  # no pattern: the last part is the node
    ({"SLURM_TOPOLOGY_ADDR": "gpu07", "SLURM_TOPOLOGY_ADDR_PATTERN": "node"}, None),  # no topology plugin
    ({}, None),
])
def test_slurm_topology_addr(env, rack):
    assert racks.from_slurm(env) == rack


def test_missing_lists_the_nodes_without_a_rack_in_order():
    assert racks.missing(["c", "a", "b"], {"a": "r1"}) == ["c", "b"]
    assert racks.missing(["a"], {"a": ""}) == ["a"]
