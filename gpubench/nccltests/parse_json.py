"""nccl-tests' ``-J FILE.json`` output (2.17.3+; format versions 1-3, src/util.cu) into one :class:`Run`.

Quirks of the writer (a hand-rolled libc JSON writer):
- booleans are the strings "true"/"false"; NaN doubles are the string "nan";
- ``root`` is the row's ``%6i``-padded string ("    -1");
- ``nwrong`` is a double, null when the placement was not validated (-c 0, or alltoall's in-place);
- ``out_of_place`` is null for the trace-replay mode that runs in-place only;
- ``config.devices`` holds the first device line of each process (one entry without MPI): the world size is
  entries × nthreads × ngpus;
- versions 1 (2.17.3-2.19.1) spelled the footer key ``average_bus_bandwidith`` / ``bandwidith`` until 2.17.9;
- ``env`` is the process environment: never stored, only NCCL_*/RCCL_* settings that do not look secret
  (:mod:`envscrub`).
"""

from __future__ import annotations

import json
import math

from gpubench.nccltests import model
from gpubench.nccltests.envscrub import scrub
from gpubench.nccltests.model import Device, ParseError, Row, Run

VERSIONS = (1, 2, 3)
# The JSON config's keys → the names the text parser gives the same settings.
_CONFIG_KEYS = {"minimum_bytes": "min_bytes", "maximum_bytes": "max_bytes", "step_factor": "step", "step_bytes": "step",
                "iterations": "iters", "aggregated_iterations": "agg_iters", "blocking_collectives": "blocking"}
# What nccl-tests writes with %lf: six decimals.
_TOL = 5e-7


def _float(value: object, where: str, source: str) -> float:
    if isinstance(value, str) and value.lower() in ("nan", "-nan"):
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParseError(source, where, f"expected a number, found {value!r}")
    return float(value)


def _bool(value: str | bool | None) -> bool | None:
    return {"true": True, "false": False}.get(value) if isinstance(value, str) else value


def parse_json(text: str, source: str = "<json>", *, collective: str | None = None) -> list[Run]:
    """The run recorded in an nccl-tests ``-J`` file (a list, like :func:`parse_text`'s answer)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        lines = text.splitlines()
        shown = lines[e.lineno - 1] if 0 < e.lineno <= len(lines) else None
        raise ParseError(source, e.lineno, f"not valid JSON ({e.msg})", shown) from None
    if not isinstance(doc, dict) or "version" not in doc:
        raise ParseError(source, None, "not an nccl-tests JSON file (no top-level \"version\")")
    if doc["version"] not in VERSIONS:
        raise ParseError(source, None, f"nccl-tests JSON format version {doc['version']!r} is not known "
                                       f"(gpubench reads {', '.join(map(str, VERSIONS))})")
    if not isinstance(doc.get("results"), list):
        raise ParseError(source, None, "no \"results\" list: the run ended before printing a table")
    config = doc.get("config") or {}
    run = Run(source=source, line=1, tool="nccl-tests", tool_detected=True, generation=f"json-v{doc['version']}")
    args = doc.get("args") or []
    if args:
        run.collective = model.collective_of_binary(str(args[0]).rsplit("/", 1)[-1])
    if isinstance(doc.get("nccl_version"), int):
        run.nccl_version = model.nccl_version(doc["nccl_version"])
    run.config = {_CONFIG_KEYS.get(k, k): _bool(v) for k, v in config.items() if k != "devices"}
    if "step_factor" in config or "step_bytes" in config:
        run.config["step_kind"] = "factor" if "step_factor" in config else "bytes"
    run.config.update(args=[str(a) for a in args], start_time=doc.get("start_time"), end_time=doc.get("end_time"))
    env = scrub(doc.get("env") or [])
    if env:
        run.config["env"] = env
    for d in config.get("devices") or []:
        run.devices.append(Device(rank=int(d.get("rank", 0)), host=str(d.get("hostname", "")),
                                  device=int(d.get("device", 0)), name=str(d.get("device_info", "")),
                                  pid=d.get("pid"), group=d.get("group"), bus=d.get("device_hex")))
    if run.devices:
        # One entry per process (its first rank), each process driving nthreads × ngpus ranks.
        per_process = max(1, int(config.get("nthreads", 1))) * max(1, int(config.get("ngpus", 1)))
        run.world_size = len(run.devices) * per_process
        run.nnodes = len(run.hostnames)
    for i, res in enumerate(doc["results"], 1):
        where = f"results[{i - 1}]"
        try:
            size, count, type_name = int(res["size"]), int(res["count"]), str(res["type"])
            redop, root = str(res["redop"]), model.integer(str(res["root"]).strip())
        except (KeyError, TypeError, ValueError) as e:
            raise ParseError(source, where, f"unreadable result ({e})") from None
        if model.dtype_of(type_name) is None:
            raise ParseError(source, where, f"unknown data type {type_name!r}")
        for placement, key in (("out", "out_of_place"), ("in", "in_place")):
            body = res.get(key)
            if body is None:
                continue
            time = body.get("time", body.get("cpu_time"))
            nwrong = body.get("nwrong")
            row = Row(line=i, size=size, count=count, type=type_name, redop=redop, root=root, placement=placement,
                      time_us=_float(time, where, source), algbw=_float(body.get("alg_bw"), where, source),
                      busbw=_float(body.get("bus_bw"), where, source),
                      wrong=None if nwrong is None else int(round(_float(nwrong, where, source))),
                      time_tol=_TOL, algbw_tol=_TOL, busbw_tol=_TOL)
            per_iter = res.get(f"{key}_per_iter")
            if isinstance(per_iter, dict):
                row.extra.update({k: v for k, v in per_iter.items() if k != "times_us"})
            run.rows.append(row)
        if "cpu_time" in (res.get("in_place") or res.get("out_of_place") or {}):
            run.config["cputime"] = True
    oob = doc.get("out_of_bounds") or {}
    if "count" in oob:
        run.out_of_bounds, run.out_of_bounds_ok = int(oob["count"]), _bool(oob.get("okay"))
    avg = doc.get("average_bus_bandwidth", doc.get("average_bus_bandwidith")) or {}
    bw = avg.get("bandwidth", avg.get("bandwidith"))
    if bw is not None:
        run.avg_busbw, run.avg_busbw_tol = _float(bw, "average_bus_bandwidth", source), _TOL
    run.errors = [e for e in doc.get("errors") or [] if e]
    model.collective(run, collective, set())
    return [run]


__all__ = ["parse_json"]
