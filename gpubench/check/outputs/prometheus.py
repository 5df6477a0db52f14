"""A Prometheus textfile for node-exporter's textfile collector, so that a fleet's dashboards and alerts see each
node's verdict: per verdict its status, its state one-hot, the figure judged and its threshold; the node's status
and when the file was written. prometheus_client writes the file (beside it, then renamed)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from gpubench.check.verdicts import SIMULATED, STATES, NodeVerdict, Verdict
from gpubench.check.outputs.common import finite
from gpubench.errors import UsageError

SUFFIXES = (".prom",)
# Never printed: node-exporter reads the *.prom files of its directory alone.
FILE_ONLY = ("--format prometheus writes a node-exporter textfile: add --report PATH.prom (in node-exporter's "
             "--collector.textfile.directory)")
# 1 healthy, 0.5 look at it, 0 take it out of service; a node never judged is -1 (no sample would read as "no
# data", which an alert cannot tell from a node-exporter that stopped).
STATUS_VALUE: dict[str, float] = {"PASS": 1.0, "WARN": 0.5, "FAIL": 0.0, "SKIP": -1.0}
# target: the verdict's own (gpu3, gpu0-gpu1, node; the fabric's node03, node01-node04, node03:mlx5_0/1), so that
# the fabric check's many nodes, links and ports are a series each
_LABELS = ("host", "gpu", "pair", "check", "target")
# A simulated node's every sample carries simulated="true": a dashboard or an alert on real nodes can leave it out,
# and nobody reads it as hardware's.
_SIMULATED_LABEL = (SIMULATED,)


def _labels(node: NodeVerdict, v: Verdict) -> list[str]:
    pair = f"{v.pair[0]}-{v.pair[1]}" if v.pair else ""
    return [node.host, "" if v.gpu is None else str(v.gpu), pair, v.check, v.target,
            *(["true"] if node.simulated else [])]


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
        # the simulated label goes after the verdict's own (host, gpu, pair, check, target), before state or unit
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
            if finite(x) is not None:
                family.add_metric([*labels, v.unit or ""], finite(x))
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


def write(node: NodeVerdict, path: str) -> None:
    """Write the verdict as a node-exporter textfile at ``path``."""
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


__all__ = ["write", "STATUS_VALUE", "SUFFIXES", "FILE_ONLY"]
