"""The NIC facts of a node (gpubench check --fabric): read from a fake sysfs tree in the kernel's layout and formats
(drivers/infiniband/core/sysfs.c, hw/mlx5/counters.c, hw/efa/efa_verbs.c), judged one rule per fact."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from gpubench.check.facts import nic_rules
from gpubench.check.facts.readers import fake_sysfs as fs
from gpubench.check.facts.readers import rdma

ROOT = Path(__file__).resolve().parent.parent


def _judge(tmp_path, change=None, nics=None, nets=None, expected=400.0):
    """Write a tree, read it, apply ``change`` (the test happening), read again, judge."""
    root = fs.write_tree(tmp_path / "sys", nics=nics, nets=nets)
    before = rdma.read(root)
    if change:
        change(root)
    return nic_rules.judge(before, rdma.read(root), expected)


def _by(verdicts, check, target):
    [v] = [v for v in verdicts if v.check == check and v.target == target]
    return v


def test_a_healthy_node_passes_every_fact(tmp_path):
    verdicts = _judge(tmp_path)
    assert len(verdicts) == 8 * 3 + 1
    assert {v.state for v in verdicts} == {"PASS"}
    assert all(v.kind == "fact" and v.nodes == [] for v in verdicts)
    assert _by(verdicts, "nic_rate", "mlx5_3/1").value == 400.0


def test_a_port_down_fails_and_its_rate_is_not_judged(tmp_path):
    nics = fs.healthy_nics()
    nics[2] = fs.ib_nic("mlx5_2", state="1: DOWN", phys_state="2: Polling", rate="10 Gb/sec (4X)")
    verdicts = _judge(tmp_path, nics=nics)
    port = _by(verdicts, "nic_port", "mlx5_2/1")
    assert port.state == "FAIL" and "DOWN" in port.text and "Polling: no cable or no peer" in port.text
    assert _by(verdicts, "nic_rate", "mlx5_2/1").state == "SKIP"
    assert _by(verdicts, "nic_port", "mlx5_1/1").state == "PASS"


def test_a_physical_link_polling_fails_even_where_the_state_reads_active(tmp_path):
    nics = [fs.ib_nic("mlx5_0", phys_state="2: Polling")]
    v = _by(_judge(tmp_path, nics=nics), "nic_port", "mlx5_0/1")
    assert v.state == "FAIL" and v.text.startswith("physical link Polling")


def test_a_port_that_goes_down_during_the_test_fails(tmp_path):
    verdicts = _judge(tmp_path, lambda r: fs.write_value(r, fs.port_path("mlx5_5") + "/state", "2: INIT"))
    v = _by(verdicts, "nic_port", "mlx5_5/1")
    assert v.state == "FAIL" and "INIT" in v.text and v.text.endswith("after the test")


def test_a_port_trained_down_to_200_of_400_fails(tmp_path):
    nics = fs.healthy_nics()
    nics[4] = fs.ib_nic("mlx5_4", rate="200 Gb/sec (2X NDR)")
    v = _by(_judge(tmp_path, nics=nics), "nic_rate", "mlx5_4/1")
    assert v.state == "FAIL" and v.text.startswith("trained down: 200 of 400 Gb/s")
    assert (v.value, v.fail_at, v.unit) == (200.0, 400.0, "Gb/s")


def test_without_an_expected_rate_the_port_below_its_peers_warns_and_the_others_pass_with_a_note(tmp_path):
    nics = fs.healthy_nics()
    nics[1] = fs.ib_nic("mlx5_1", rate="200 Gb/sec (4X HDR)")
    verdicts = _judge(tmp_path, nics=nics, expected=None)
    low = _by(verdicts, "nic_rate", "mlx5_1/1")
    assert low.state == "WARN" and "below the 400 Gb/s of this node's other InfiniBand ports" in low.text
    ok = _by(verdicts, "nic_rate", "mlx5_0/1")
    assert ok.state == "PASS" and "400 Gb/s" in ok.text and "no rate was expected" in ok.notes[0]


def test_a_front_end_port_of_another_kind_is_not_held_to_the_fabric_rate(tmp_path):
    # 8 NDR InfiniBand ports and a 100 GbE front-end port: a healthy node, not a port trained down.
    nics = fs.healthy_nics() + [fs.roce_nic("mlx5_8", rate="100 Gb/sec (4X EDR)")]
    verdicts = _judge(tmp_path, nics=nics)
    v = _by(verdicts, "nic_rate", "mlx5_8/1")
    assert v.state == "PASS" and "not held to the expected rate" in v.notes[0]
    assert {v.state for v in verdicts} == {"PASS"}


def test_link_downed_growing_during_the_test_fails(tmp_path):
    verdicts = _judge(tmp_path, lambda r: fs.write_value(r, fs.port_path("mlx5_6") + "/counters/link_downed", 1))
    v = _by(verdicts, "nic_errors", "mlx5_6/1")
    assert v.state == "FAIL" and "link_downed +1" in v.text


def test_symbol_errors_growing_warn_and_the_count_since_reset_is_said(tmp_path):
    nics = fs.healthy_nics()
    nics[0] = fs.ib_nic("mlx5_0", counters={"symbol_error": 40, "port_xmit_discards": 7})
    verdicts = _judge(tmp_path, lambda r: fs.write_value(r, fs.port_path("mlx5_0") + "/counters/symbol_error", 52),
                      nics=nics)
    v = _by(verdicts, "nic_errors", "mlx5_0/1")
    assert v.state == "WARN" and "symbol_error +12" in v.text and "symbol_error 40" in v.text


def test_counts_since_reset_alone_are_not_judged(tmp_path):
    # A link repaired last month keeps its counts until someone clears them: no growth, no verdict against it.
    nics = [fs.ib_nic("mlx5_0", counters={"symbol_error": 900, "link_downed": 3})]
    v = _by(_judge(tmp_path, nics=nics), "nic_errors", "mlx5_0/1")
    assert v.state == "PASS" and "link_downed 3" in v.text and "symbol_error 900" in v.text


def test_with_no_reading_after_the_test_counters_and_flaps_skip(tmp_path):
    root = fs.write_tree(tmp_path / "sys", nics=[fs.ib_nic("mlx5_0", counters={"symbol_error": 5})])
    verdicts = nic_rules.judge(rdma.read(root), None, 400.0)
    assert _by(verdicts, "nic_errors", "mlx5_0/1").state == "SKIP"
    assert "symbol_error 5" in _by(verdicts, "nic_errors", "mlx5_0/1").text
    assert _by(verdicts, "net_carrier", "eth0").state == "SKIP"
    assert _by(verdicts, "nic_port", "mlx5_0/1").state == "PASS"


def test_a_counter_at_its_ceiling_cannot_show_growth_and_does_not_pass(tmp_path):
    nics = [fs.ib_nic("mlx5_0", counters={"symbol_error": 65535})]
    v = _by(_judge(tmp_path, nics=nics), "nic_errors", "mlx5_0/1")
    assert v.state == "SKIP" and "ceiling 65535" in v.notes[0]


def test_carrier_changes_growing_during_the_test_fail_as_a_flapping_link(tmp_path):
    nets = [fs.net("ib0", carrier_changes=4), fs.net("eth0")]
    verdicts = _judge(tmp_path, lambda r: fs.write_value(r, "class/net/ib0/carrier_changes", 6), nets=nets)
    v = _by(verdicts, "net_carrier", "ib0")
    assert v.state == "FAIL" and "changed 2 times" in v.text and "flapping" in v.text
    assert _by(verdicts, "net_carrier", "eth0").state == "PASS"


def test_virtual_interfaces_are_not_read(tmp_path):
    nets = [fs.net("eth0"), fs.net("lo"), fs.net("docker0"), fs.net("veth12ab"), fs.net("virbr0"),
            fs.net("br-cni", virtual=True)]
    snap = rdma.read(fs.write_tree(tmp_path / "sys", nets=nets))
    assert [n.name for n in snap.nets] == ["eth0"]
    assert set(snap.skipped) == {"lo", "docker0", "veth12ab", "virbr0", "br-cni"}
    assert "devices/virtual" in snap.skipped["br-cni"]


def test_no_infiniband_directory_is_one_skip_with_its_reason(tmp_path):
    verdicts = _judge(tmp_path, nics=[])
    rdma_verdicts = [v for v in verdicts if v.check != "net_carrier"]
    assert len(rdma_verdicts) == 1 and rdma_verdicts[0].state == "SKIP"
    assert rdma_verdicts[0].text == "no RDMA device under /sys/class/infiniband"
    assert _by(verdicts, "net_carrier", "eth0").state == "PASS"


def test_an_unreadable_file_is_never_a_pass(tmp_path):
    root = fs.write_tree(tmp_path / "sys", nics=[fs.ib_nic("mlx5_0", state=None, rate=None)])
    # A directory where the file should be: unreadable even to root, as an EIO from a driver is.
    os.makedirs(os.path.join(root, fs.port_path("mlx5_0"), "state"))
    snap = rdma.read(root)
    assert snap.ports[0].state is None and "state" in snap.ports[0].why
    verdicts = nic_rules.judge(snap, rdma.read(root), 400.0)
    assert _by(verdicts, "nic_port", "mlx5_0/1").state == "SKIP"
    assert _by(verdicts, "nic_rate", "mlx5_0/1").state == "SKIP"
    assert "rate not present" in _by(verdicts, "nic_rate", "mlx5_0/1").text


def test_counters_without_a_pma_are_unknown_not_zero(tmp_path):
    na = dict.fromkeys(fs.IB_COUNTERS, "N/A (no PMA)")
    root = fs.write_tree(tmp_path / "sys", nics=[fs.ib_nic("mlx5_0", counters=na, hw_counters=None)])
    snap = rdma.read(root)
    assert snap.ports[0].counters["symbol_error"] is None
    assert "N/A (no PMA)" in snap.ports[0].why["symbol_error"]
    v = _by(nic_rules.judge(snap, rdma.read(root)), "nic_errors", "mlx5_0/1")
    assert v.state == "SKIP"


def test_roce_transport_retries_warn_and_out_of_order_arrival_is_only_said(tmp_path):
    nics = [fs.roce_nic(f"mlx5_{i}") for i in range(2)]

    def test_runs(root):
        fs.write_value(root, fs.port_path("mlx5_0") + "/hw_counters/packet_seq_err", 3)
        fs.write_value(root, fs.port_path("mlx5_1") + "/hw_counters/out_of_sequence", 1000)

    verdicts = _judge(tmp_path, test_runs, nics=nics)
    bad = _by(verdicts, "nic_errors", "mlx5_0/1")
    assert bad.state == "WARN" and "packet_seq_err +3" in bad.text
    ok = _by(verdicts, "nic_errors", "mlx5_1/1")
    assert ok.state == "PASS" and "out_of_sequence +1000 (not judged)" in ok.text
    assert rdma.read(tmp_path / "sys").ports[0].kind == "roce"


def test_efa_srd_timeouts_warn_routine_retransmits_do_not(tmp_path):
    nics = [fs.efa_nic("rdmap16s27"), fs.efa_nic("rdmap32s27")]

    def test_runs(root):
        fs.write_value(root, fs.port_path("rdmap16s27") + "/hw_counters/retrans_timeout_events", 2)
        fs.write_value(root, fs.port_path("rdmap32s27") + "/hw_counters/retrans_pkts", 500)

    verdicts = _judge(tmp_path, test_runs, nics=nics)
    assert _by(verdicts, "nic_errors", "rdmap16s27/1").state == "WARN"
    assert _by(verdicts, "nic_errors", "rdmap32s27/1").state == "PASS"
    port = _by(verdicts, "nic_port", "rdmap16s27/1")
    assert port.state == "PASS" and "EFA driver reports every port ACTIVE" in port.notes[0]
    snap = rdma.read(tmp_path / "sys")
    assert snap.ports[0].kind == "efa" and snap.ports[0].counters == {} and snap.ports[0].link_layer == "Unknown"


@pytest.mark.parametrize("text, gbps", [("400 Gb/sec (4X NDR)", 400.0), ("2.5 Gb/sec (1X)", 2.5),
                                         ("10 Gb/sec (4X)", 10.0), ("56 Gb/sec (4X FDR)", 56.0),
                                         ("N/A", None), ("", None), (None, None)])
def test_rates_as_the_kernel_writes_them(text, gbps):
    # drivers/infiniband/core/sysfs.c rate_show: "%d%s Gb/sec (%dX%s)", ".5" for a half, no speed name for SDR.
    assert rdma.parse_rate(text) == gbps


def test_states_are_read_by_name_as_the_kernel_writes_them(tmp_path):
    nics = [fs.ib_nic("mlx5_0", state="3: ARMED", phys_state="7: Phy Test")]
    p = rdma.read(fs.write_tree(tmp_path / "sys", nics=nics)).ports[0]
    assert (p.state, p.phys_state, p.driver, p.link_layer) == ("ARMED", "Phy Test", "mlx5_core", "InfiniBand")
    assert "lifespan" not in p.hw_counters


def test_the_root_comes_from_the_argument_then_the_environment_then_sys(tmp_path, monkeypatch):
    root = fs.write_tree(tmp_path / "fake", nics=[fs.ib_nic("mlx5_9")])
    monkeypatch.setenv(rdma.FAKE_SYSFS_ENV, root)
    assert [p.dev for p in rdma.read().ports] == ["mlx5_9"]
    assert rdma.read(str(tmp_path / "none")).why == "no RDMA device under /sys/class/infiniband"
    monkeypatch.delenv(rdma.FAKE_SYSFS_ENV)
    assert rdma.sysfs_root() == "/sys"


def test_simulated_verdicts_say_so_first(tmp_path):
    root = fs.write_tree(tmp_path / "sys")
    verdicts = nic_rules.judge(rdma.read(root), rdma.read(root), 400.0, simulated=True)
    assert all(v.simulated and v.text.startswith("simulated: ") for v in verdicts)


def test_the_nic_rules_read_nothing_and_the_gpu_facts_are_untouched():
    from gpubench.check.facts.rules import CHECKS

    for path in (ROOT / "gpubench" / "check" / "facts" / "nic_rules").glob("*.py"):
        mods = [n.module for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ImportFrom)]
        assert not [m for m in mods if m and m.startswith("gpubench.check.facts.readers")], path.name
    assert not set(nic_rules.CHECKS) & set(CHECKS)
