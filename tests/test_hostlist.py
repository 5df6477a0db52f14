"""SLURM host lists read as SLURM reads them (gpubench.ranks.hostlist): the forms of SLURM's documentation, its
errors, scontrol preferred where it is on PATH, and python-hostlist (GPL, never a dependency) as an oracle where it
happens to be installed."""

from __future__ import annotations

import os
import stat

import pytest

from gpubench.errors import UsageError
from gpubench.ranks import hostlist
from gpubench.ranks.env import detect

# (host list, the hosts SLURM expands it to). From SLURM's documentation (slurm.conf's NodeName examples, the
# man pages' "hostlist expressions") and the forms issue 46 found mis-read.
FORMS = [
    ("node1", ["node1"]),
    ("tux[0-3]", ["tux0", "tux1", "tux2", "tux3"]),
    ("lx[15,18,32-33]", ["lx15", "lx18", "lx32", "lx33"]),
    ("linux[000-002]", ["linux000", "linux001", "linux002"]),  # zero padding kept
    ("gpu[01-10]", [f"gpu{i:02d}" for i in range(1, 11)]),
    ("x[8-10]", ["x8", "x9", "x10"]),  # as wide as the first number written: no padding
    ("x[08-10]", ["x08", "x09", "x10"]),
    ("x[010,2]", ["x010", "x2"]),  # each range its own width
    ("rack1-[01-02]-gpu", ["rack1-01-gpu", "rack1-02-gpu"]),  # a suffix after the bracket
    ("a[1-2]b[3-4]", ["a1b3", "a1b4", "a2b3", "a2b4"]),  # several brackets: the leftmost outermost
    ("a[3-5,9],b1", ["a3", "a4", "a5", "a9", "b1"]),  # a comma list of names
    ("dgx[1-2],dgx[4],login", ["dgx1", "dgx2", "dgx4", "login"]),
    ("n[1-2] m1", ["n1", "n2", "m1"]),  # white space separates names too
    ("  gpu[1-2]  ", ["gpu1", "gpu2"]),
]


@pytest.mark.parametrize("text,hosts", FORMS)
def test_slurms_documented_forms(text, hosts):
    assert hostlist.parse(text) == hosts
    assert hostlist.first(text) == hosts[0]


def test_the_slurm_conf_example_is_the_product_of_its_brackets():
    hosts = hostlist.parse("rack[0-63]_blade[0-41]")
    assert len(hosts) == 64 * 42 and hosts[:2] == ["rack0_blade0", "rack0_blade1"] and hosts[-1] == "rack63_blade41"


@pytest.mark.parametrize("text,why", [("x[2-1]", "backwards"), ("x[1-2", "without its ']'"), ("x1-2]", "without its '['"),
                                      ("x[a-b]", "not a number"), ("x[[1]]", "inside a bracket"),
                                      ("x[0-70000]", "more than"), ("a[0-999]b[0-999]", "more than")])
def test_what_slurm_refuses_is_one_line_saying_so(text, why):
    with pytest.raises(UsageError, match="cannot read the SLURM host list") as e:
        hostlist.parse(text)
    assert why in str(e.value) and "\n" not in str(e.value)


def test_the_rendezvous_host_of_a_step_is_its_first_node_whatever_the_form():
    for nodelist, first in [("rack1-[01-02]-gpu", "rack1-01-gpu"), ("a[1-2]b[3-4]", "a1b3")]:
        env = {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_STEP_NODELIST": nodelist, "SLURM_JOB_ID": "7"}
        assert detect(env).master_addr == first
    with pytest.raises(UsageError, match="set MASTER_ADDR"):
        detect({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_STEP_NODELIST": "x[2-1]"})


def test_scontrol_is_asked_first_where_it_is_on_path(tmp_path, monkeypatch):
    fake = tmp_path / "scontrol"
    fake.write_text("#!/bin/sh\n[ \"$1 $2\" = 'show hostnames' ] || exit 3\necho from-scontrol-1\necho from-scontrol-2\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert hostlist.expand("gpu[1-2]") == ["from-scontrol-1", "from-scontrol-2"]
    assert hostlist.expand("gpu[1-2]", scontrol=False) == ["gpu1", "gpu2"]
    fake.write_text("#!/bin/sh\nexit 1\n")  # scontrol there but not answering: the same grammar, read here
    assert hostlist.expand("gpu[1-2]") == ["gpu1", "gpu2"]


def test_python_hostlist_agrees_where_it_is_installed():
    oracle = pytest.importorskip("hostlist", reason="python-hostlist (GPL) is an optional oracle, not a dependency")
    for text, _ in FORMS:
        if " " not in text.strip():  # python-hostlist does not split on white space; SLURM does
            assert hostlist.parse(text) == oracle.expand_hostlist(text.strip()), text
    assert hostlist.parse("rack[0-63]_blade[0-41]") == oracle.expand_hostlist("rack[0-63]_blade[0-41]")
