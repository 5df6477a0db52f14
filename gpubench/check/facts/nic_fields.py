"""The NIC facts of a node, shared by their reader (:mod:`gpubench.check.facts.readers.rdma`) and their rules
(:mod:`gpubench.check.facts.nic_rules`): each RDMA port and each network interface as sysfs showed it at one moment.
``None`` is "unknown" throughout, with the reason in ``why``."""

from __future__ import annotations

from dataclasses import dataclass, field

# Where the kernel lists RDMA devices; named in every verdict that says there is none.
IB_CLASS = "class/infiniband"
NET_CLASS = "class/net"


@dataclass
class Port:
    """One port of one RDMA device (``/sys/class/infiniband/<dev>/ports/<port>/``)."""

    dev: str
    port: str
    state: str | None = None  # the name of "4: ACTIVE": ACTIVE, DOWN, INIT, ARMED
    phys_state: str | None = None  # the name of "5: LinkUp": LinkUp, Polling, Disabled, ...
    rate_gbps: float | None = None  # from "400 Gb/sec (4X NDR)"
    rate: str | None = None  # the rate as sysfs wrote it
    link_layer: str | None = None  # InfiniBand, Ethernet (RoCE), Unknown (EFA)
    driver: str | None = None  # the PCI driver behind the device: mlx5_core, efa, bnxt_en, ...
    counters: dict[str, int | None] = field(default_factory=dict)  # counters/ (the IB PMA's), by file name
    hw_counters: dict[str, int | None] = field(default_factory=dict)  # hw_counters/ (the driver's), by file name
    why: dict[str, str] = field(default_factory=dict)  # field or counter name -> why it is None

    @property
    def target(self) -> str:
        return f"{self.dev}/{self.port}"

    @property
    def kind(self) -> str:
        """"efa", "roce", "ib" or "unknown": EFA ports say link layer Unknown, so the driver (or its SRD
        counters) tells them apart."""
        if self.driver == "efa" or "retrans_timeout_events" in self.hw_counters:
            return "efa"
        return {"InfiniBand": "ib", "Ethernet": "roce"}.get(self.link_layer or "", "unknown")


@dataclass
class NetIf:
    """One network interface (``/sys/class/net/<name>/``)."""

    name: str
    operstate: str | None = None  # up, down, dormant, unknown, ...
    carrier_changes: int | None = None  # carrier up and down events since the interface was created
    why: dict[str, str] = field(default_factory=dict)


@dataclass
class NicSnapshot:
    """Every RDMA port and network interface of a node at one moment. ``why``: why ``ports`` is empty (no
    device, or the directory cannot be listed); ``skipped``: interfaces not read, and why."""

    root: str
    ports: list[Port] = field(default_factory=list)
    nets: list[NetIf] = field(default_factory=list)
    why: str | None = None
    skipped: dict[str, str] = field(default_factory=dict)

    def port(self, target: str) -> Port | None:
        return next((p for p in self.ports if p.target == target), None)

    def net(self, name: str) -> NetIf | None:
        return next((n for n in self.nets if n.name == name), None)


__all__ = ["IB_CLASS", "NET_CLASS", "Port", "NetIf", "NicSnapshot"]
