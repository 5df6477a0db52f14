"""The NIC facts of a node, read from sysfs (no root, no library): :func:`read` returns a :class:`NicSnapshot` of
every RDMA port and every physical network interface. Nothing here judges, and nothing raises: a file that cannot
be read is None, with the reason in the port's or interface's ``why``.

Formats, from the kernel's own writers and the tools that read them:

* ``ports/<p>/state`` "4: ACTIVE", ``phys_state`` "5: LinkUp" (or "2: Polling" ...), ``rate`` "400 Gb/sec (4X NDR)"
  (a half as "2.5 Gb/sec (1X)"), ``link_layer`` InfiniBand / Ethernet / Unknown: torvalds/linux
  drivers/infiniband/core/sysfs.c (state_show, phys_state_show, rate_show, link_layer_show) and
  Documentation/ABI/stable/sysfs-class-infiniband.
* ``ports/<p>/counters/*``: the IB PMA PortCounters (symbol_error, link_error_recovery, link_downed, port_rcv_errors,
  port_xmit_discards, ...), "N/A (no PMA)" where the device answers no PMA query: sysfs.c (show_pma_counter,
  PORT_PMA_ATTR). Read the same way by mej/nhc scripts/lbnl_hw.nhc (check_hw_ib), Meta's facebookresearch/gcm
  check_ib_counters, Azure/azurehpc-health-checks.
* ``ports/<p>/hw_counters/*``: the driver's own. mlx5 (RoCE and IB): out_of_sequence, packet_seq_err,
  implied_nak_seq_err, local_ack_timeout_err, rnr_nak_retry_err, duplicate_request (torvalds/linux
  drivers/infiniband/hw/mlx5/counters.c, retrans_q_cnts); EFA: retrans_pkts, retrans_timeout_events,
  unresponsive_remote_events, impaired_remote_conn_events, rx_drops (drivers/infiniband/hw/efa/efa_verbs.c,
  EFA_DEFINE_PORT_STATS; efa_com_cmd.h efa_com_network_stats). ``lifespan`` there is a setting, not a counter.
* ``/sys/class/net/<if>/carrier_changes``, ``operstate``: Documentation/ABI/testing/sysfs-class-net.
"""

from __future__ import annotations

import os
import re

from gpubench.check.facts.nic_fields import IB_CLASS, NET_CLASS, NetIf, NicSnapshot, Port

FAKE_SYSFS_ENV = "GPUBENCH_FAKE_SYSFS"  # a fake tree's root, for tests and the fake backend
# Interfaces whose carrier follows containers and VMs coming and going, not a cable: their flips say nothing about
# the fabric. Any other interface whose sysfs node lives under devices/virtual (bridges, bonds, tunnels) is skipped
# too, for the same reason.
VIRTUAL_PREFIXES = ("docker", "veth", "virbr")
_NOT_COUNTERS = {"lifespan"}  # hw_counters/lifespan: how long (ms) the driver caches its counters
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")


def sysfs_root(root: str | None = None) -> str:
    """The sysfs root to read: ``root``, else ``$GPUBENCH_FAKE_SYSFS``, else /sys."""
    return root or os.environ.get(FAKE_SYSFS_ENV) or "/sys"


def read(root: str | None = None) -> NicSnapshot:
    """Every RDMA port under ``<root>/class/infiniband`` and every physical interface under ``<root>/class/net``."""
    root = sysfs_root(root)
    snap = NicSnapshot(root=root)
    ib = os.path.join(root, IB_CLASS)
    devs, why = _listdir(ib)
    if devs is None or not devs:
        snap.why = f"no RDMA device under /sys/{IB_CLASS}" + (f" ({why})" if why else "")
    for dev in devs or ():
        snap.ports += _device_ports(os.path.join(ib, dev), dev)
    if devs and not snap.ports:
        snap.why = f"no port under /sys/{IB_CLASS}/*/ports"
    nets, why = _listdir(os.path.join(root, NET_CLASS))
    for name in nets or ():
        skip = _virtual(os.path.join(root, NET_CLASS, name), name)
        if skip:
            snap.skipped[name] = skip
        else:
            snap.nets.append(_net(os.path.join(root, NET_CLASS, name), name))
    if nets is None:
        snap.skipped["*"] = f"network interfaces not listed ({why})"
    return snap


def _device_ports(path: str, dev: str) -> list[Port]:
    ports, why = _listdir(os.path.join(path, "ports"))
    driver = _driver(path)
    if ports is None:
        return [Port(dev=dev, port="?", driver=driver, why={"port": f"ports not listed ({why})"})]
    return [_port(os.path.join(path, "ports", p), dev, p, driver) for p in sorted(ports, key=_natural)]


def _port(path: str, dev: str, port: str, driver: str | None) -> Port:
    p = Port(dev=dev, port=port, driver=driver)
    p.state = _named(_text(path, "state", p.why), "state", p.why)
    p.phys_state = _named(_text(path, "phys_state", p.why), "phys_state", p.why)
    p.rate = _text(path, "rate", p.why)
    p.rate_gbps = parse_rate(p.rate)
    if p.rate is not None and p.rate_gbps is None:
        p.why["rate_gbps"] = f"rate {p.rate!r} is not '<n> Gb/sec (...)'"
    p.link_layer = _text(path, "link_layer", p.why)
    p.counters = _counters(os.path.join(path, "counters"), p.why)
    p.hw_counters = _counters(os.path.join(path, "hw_counters"), p.why)
    return p


def parse_rate(text: str | None) -> float | None:
    """Gb/s from sysfs's rate ("400 Gb/sec (4X NDR)" -> 400.0, "2.5 Gb/sec (1X)" -> 2.5), None where it is not one."""
    m = _RATE.match(text or "")
    return float(m.group(1)) if m else None


def _named(text: str | None, key: str, why: dict[str, str]) -> str | None:
    """"4: ACTIVE" -> "ACTIVE": the name is what tools and people quote; the number only repeats it."""
    if text is None:
        return None
    name = text.partition(":")[2].strip() if ":" in text else text.strip()
    if not name:
        why[key] = f"{key} {text!r} names no state"
        return None
    return name


def _counters(path: str, why: dict[str, str]) -> dict[str, int | None]:
    """Every counter file of ``path`` (absent: none), as an int; one that is not a number is None with why."""
    names, _ = _listdir(path)
    out: dict[str, int | None] = {}
    for name in sorted(names or ()):
        if name in _NOT_COUNTERS:
            continue
        raw = _text(path, name, why)
        try:
            out[name] = int(raw) if raw is not None else None
        except ValueError:
            out[name] = None
            why[name] = f"{os.path.basename(path)}/{name} reads {raw!r}, not a count"  # "N/A (no PMA)"
    return out


def _net(path: str, name: str) -> NetIf:
    n = NetIf(name=name)
    n.operstate = _text(path, "operstate", n.why)
    raw = _text(path, "carrier_changes", n.why)
    try:
        n.carrier_changes = int(raw) if raw is not None else None
    except ValueError:
        n.why["carrier_changes"] = f"carrier_changes reads {raw!r}, not a count"
    return n


def _virtual(path: str, name: str) -> str | None:
    """Why interface ``name`` is not read, or None to read it."""
    if name == "lo" or name.startswith(VIRTUAL_PREFIXES):
        return "virtual: its carrier follows containers and VMs, not a cable"
    if "/devices/virtual/" in os.path.realpath(path):
        return "virtual (under /sys/devices/virtual): no cable of its own"
    return None


def _driver(dev_path: str) -> str | None:
    """The PCI driver's name from ``device/driver`` (a link to .../drivers/<name>), None where there is none."""
    link = os.path.join(dev_path, "device", "driver")
    try:
        return os.path.basename(os.path.realpath(link)) if os.path.exists(link) else None
    except OSError:
        return None


def _text(path: str, name: str, why: dict[str, str]) -> str | None:
    """The stripped contents of ``path/name``, or None with the reason under ``why[name]``."""
    try:
        with open(os.path.join(path, name), encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except FileNotFoundError:
        why[name] = f"{name} not present"
    except PermissionError:
        why[name] = f"{name}: permission denied"
    except OSError as e:  # a driver that fails the query answers EINVAL or EIO on read
        why[name] = f"{name}: {e.strerror or e}"
    return None


def _listdir(path: str) -> tuple[list[str] | None, str | None]:
    try:
        return sorted(os.listdir(path)), None
    except FileNotFoundError:
        return None, None
    except OSError as e:
        return None, f"{path}: {e.strerror or e}"


def _natural(name: str) -> tuple[int, str]:
    return (int(name), "") if name.isdigit() else (1 << 30, name)


__all__ = ["read", "parse_rate", "sysfs_root", "FAKE_SYSFS_ENV", "NET_CLASS", "VIRTUAL_PREFIXES", "NicSnapshot",
           "Port", "NetIf"]
