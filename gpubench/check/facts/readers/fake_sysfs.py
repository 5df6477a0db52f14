"""A fake sysfs tree of NICs, in the kernel's layout and formats (see :mod:`.rdma`), for tests and the fake backend:
:func:`write_tree` writes ``<root>/class/infiniband/<dev>/ports/<port>/...`` and ``<root>/class/net/<if>/...``, so
that :func:`gpubench.check.facts.readers.rdma.read` reads it as it reads /sys (``GPUBENCH_FAKE_SYSFS=<root>``).

The healthy node (``write_tree(root)``): 8 InfiniBand ports mlx5_0..mlx5_7 port 1, ACTIVE, LinkUp,
"400 Gb/sec (4X NDR)", every error counter 0, and one Ethernet interface eth0 that is up."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from gpubench.check.facts.nic_fields import IB_CLASS, NET_CLASS

# The IB PMA counters a real mlx5 port shows (torvalds/linux drivers/infiniband/core/sysfs.c, pma_attrs_ext).
IB_COUNTERS = ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
               "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors", "port_xmit_discards",
               "port_xmit_constraint_errors", "port_rcv_constraint_errors", "local_link_integrity_errors",
               "excessive_buffer_overrun_errors", "VL15_dropped", "port_xmit_data", "port_rcv_data",
               "port_xmit_packets", "port_rcv_packets", "port_xmit_wait")
# mlx5's transport counters (drivers/infiniband/hw/mlx5/counters.c: basic, out_of_seq, retrans, cong).
MLX5_HW_COUNTERS = ("out_of_buffer", "out_of_sequence", "duplicate_request", "rnr_nak_retry_err", "packet_seq_err",
                    "implied_nak_seq_err", "local_ack_timeout_err", "np_cnp_sent", "rp_cnp_handled",
                    "np_ecn_marked_roce_packets")
# EFA's port counters (drivers/infiniband/hw/efa/efa_verbs.c, EFA_DEFINE_PORT_STATS); EFA has no PMA counters/.
EFA_HW_COUNTERS = ("tx_bytes", "tx_pkts", "rx_bytes", "rx_pkts", "rx_drops", "send_bytes", "send_wrs", "recv_bytes",
                   "recv_wrs", "rdma_read_wrs", "rdma_read_bytes", "rdma_read_wr_err", "rdma_read_resp_bytes",
                   "retrans_bytes", "retrans_pkts", "retrans_timeout_events", "unresponsive_remote_events",
                   "impaired_remote_conn_events")


def ib_nic(dev: str, port: int | str = 1, **over: Any) -> dict[str, Any]:
    """A healthy NDR InfiniBand port of an mlx5 device; ``over`` replaces any field (counters merge)."""
    nic = {"dev": dev, "port": str(port), "state": "4: ACTIVE", "phys_state": "5: LinkUp",
           "rate": "400 Gb/sec (4X NDR)", "link_layer": "InfiniBand", "driver": "mlx5_core",
           "counters": dict.fromkeys(IB_COUNTERS, 0), "hw_counters": dict.fromkeys(MLX5_HW_COUNTERS, 0)}
    return _merge(nic, over)


def roce_nic(dev: str, port: int | str = 1, **over: Any) -> dict[str, Any]:
    """A healthy 400 GbE RoCE port of an mlx5 device (link layer Ethernet, the same PMA and hw counters)."""
    return _merge(ib_nic(dev, port, rate="400 Gb/sec (4X NDR)", link_layer="Ethernet"), over)


def efa_nic(dev: str, port: int | str = 1, **over: Any) -> dict[str, Any]:
    """A healthy EFA port: the driver reports ACTIVE and LinkUp always, link layer Unknown, no PMA counters."""
    nic = {"dev": dev, "port": str(port), "state": "4: ACTIVE", "phys_state": "5: LinkUp",
           "rate": "400 Gb/sec (8X HDR)", "link_layer": "Unknown", "driver": "efa", "counters": None,
           "hw_counters": dict.fromkeys(EFA_HW_COUNTERS, 0)}
    return _merge(nic, over)


def net(name: str = "eth0", operstate: str = "up", carrier_changes: int = 2, virtual: bool = False) -> dict[str, Any]:
    """A network interface; ``virtual`` puts it under devices/virtual/net, as the kernel does bridges and bonds."""
    return {"name": name, "operstate": operstate, "carrier_changes": carrier_changes, "virtual": virtual}


def healthy_nics() -> list[dict[str, Any]]:
    return [ib_nic(f"mlx5_{i}") for i in range(8)]


def write_tree(root: str | os.PathLike, nics: Iterable[Mapping[str, Any]] | None = None,
               nets: Iterable[Mapping[str, Any]] | None = None) -> str:
    """Write the fake tree under ``root`` and return it. ``nics`` None: the healthy 8 ports; [] writes no
    class/infiniband at all (a node without RDMA). ``nets`` None: eth0, up. A field that is None is not written
    (a file the kernel did not create)."""
    root = os.fspath(root)
    nics = healthy_nics() if nics is None else list(nics)
    for nic in nics:
        _write_nic(root, nic)
    for n in [net()] if nets is None else nets:
        _write_net(root, n)
    return root


def write_value(root: str | os.PathLike, rel: str, value: object) -> None:
    """Write one sysfs file (``rel`` under ``root``): a counter growing, a port going down."""
    path = os.path.join(os.fspath(root), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(f"{value}\n")


def port_path(dev: str, port: int | str = 1) -> str:
    """A port's directory relative to the root: ``class/infiniband/<dev>/ports/<port>``."""
    return f"{IB_CLASS}/{dev}/ports/{port}"


def _write_nic(root: str, nic: Mapping[str, Any]) -> None:
    dev_dir = os.path.join(root, IB_CLASS, nic["dev"])
    port = os.path.join(root, port_path(nic["dev"], nic.get("port", 1)))
    os.makedirs(port, exist_ok=True)
    for key in ("state", "phys_state", "rate", "link_layer"):
        if nic.get(key) is not None:
            write_value(port, key, nic[key])
    for group in ("counters", "hw_counters"):
        for name, value in (nic.get(group) or {}).items():
            write_value(os.path.join(port, group), name, value)
    if nic.get("driver"):
        # As on a real node: device/driver is a link to the driver's directory, whose name is the driver's.
        drv = os.path.join(root, "bus", "pci", "drivers", nic["driver"])
        os.makedirs(drv, exist_ok=True)
        os.makedirs(os.path.join(dev_dir, "device"), exist_ok=True)
        link = os.path.join(dev_dir, "device", "driver")
        if not os.path.lexists(link):
            os.symlink(drv, link)


def _write_net(root: str, n: Mapping[str, Any]) -> None:
    cls = os.path.join(root, NET_CLASS, n["name"])
    if n.get("virtual"):
        # The kernel's class/net entries are links; a virtual one points under devices/virtual/net.
        real = os.path.join(root, "devices", "virtual", "net", n["name"])
        os.makedirs(real, exist_ok=True)
        os.makedirs(os.path.dirname(cls), exist_ok=True)
        if not os.path.lexists(cls):
            os.symlink(real, cls)
        cls = real
    os.makedirs(cls, exist_ok=True)
    for key in ("operstate", "carrier_changes"):
        if n.get(key) is not None:
            write_value(cls, key, n[key])


def _merge(nic: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = {**nic, **{k: v for k, v in over.items() if k not in ("counters", "hw_counters")}}
    for group in ("counters", "hw_counters"):
        if group in over:
            out[group] = None if over[group] is None else {**(nic.get(group) or {}), **over[group]}
    return out


__all__ = ["write_tree", "write_value", "port_path", "ib_nic", "roce_nic", "efa_nic", "net", "healthy_nics",
           "IB_COUNTERS", "MLX5_HW_COUNTERS", "EFA_HW_COUNTERS"]
