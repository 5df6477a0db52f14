"""What a sweep hands the user to apply: an env file (one configuration for everything) and a CSV in the format
of NCCL's example tuner plugin (``plugins/tuner/example``, loaded with ``NCCL_TUNER_PLUGIN`` and
``NCCL_TUNER_CONFIG_FILE``), one line per size where a winner beat the default beyond noise:

    collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff

Sizes between two measured ones go to the nearer one's line (a geometric midpoint). The tuner needs an algorithm
and a protocol: a winner that set only one of them, or neither, keeps NCCL's choice (no line).
"""

from __future__ import annotations

import math

import pandas as pd

from gpubench.suites.autotune.knobs import DEFAULT
from gpubench.suites.autotune.winners import Best, tuner_collective

HEADER = "collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff"
MAX_BYTES = 2**63 - 1


def env_file(best: Best, provenance: str) -> str:
    """The env file of the best single configuration: its settings where its gain is beyond noise, else none; why,
    in a comment."""
    name = best.name
    lines = [f"# gpubench autotune: the best single configuration, {name} ({best.score:.3f}x the default's busbw, "
             f"geometric mean over the sweep); {provenance}", "# use: set -a; . THIS_FILE; set +a"]
    if name == DEFAULT:
        lines.append("# the environment's own configuration was best: nothing to set")
    elif best.beyond_noise:
        lines += [f"# beyond the noise this sweep measured: {best.note}", *name.split(",")]
    else:
        lines.append(f"# nothing to set: its gain is within the noise this sweep measured ({best.note})")
    return "\n".join(lines) + "\n"


def _knobs(config: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in config.split(",")) if config != DEFAULT else {}


def _channels(knobs: dict[str, str]) -> int:
    lo, hi = knobs.get("NCCL_MIN_NCHANNELS"), knobs.get("NCCL_MAX_NCHANNELS")
    if lo is not None and lo == hi:
        return int(lo)
    if hi is not None and lo is None:
        return int(hi)
    return -1  # keep NCCL's


def tuner_csv(winners: pd.DataFrame, nnodes: int, nranks: int) -> str:
    """The tuner's config lines for ``winners`` (from :func:`gpubench.suites.autotune.winners.table`)."""
    lines = [f"# gpubench autotune winners beyond noise; nNodes={nnodes} nRanks={nranks}", HEADER]
    for coll, rows in winners.groupby("collective", sort=False):
        word = tuner_collective(coll)
        if word is None:
            continue
        # One line per size of the first dtype/op/placement swept for it: the tuner keys on bytes alone.
        first = rows.iloc[0]
        rows = rows[(rows["dtype"] == first["dtype"]) & (rows["op"] == first["op"])
                    & (rows["inplace"] == first["inplace"])].sort_values("bytes")
        sizes = [int(b) for b in rows["bytes"]]
        for i, (_, r) in enumerate(rows.iterrows()):
            knobs = _knobs(r["winner"])
            if not r["beyond_noise"] or "NCCL_ALGO" not in knobs or "NCCL_PROTO" not in knobs:
                continue
            lo = 0 if i == 0 else int(math.sqrt(sizes[i - 1] * sizes[i])) + 1
            hi = MAX_BYTES if i == len(sizes) - 1 else int(math.sqrt(sizes[i] * sizes[i + 1]))
            lines.append(f"{word},{lo},{hi},{knobs['NCCL_ALGO'].lower()},{knobs['NCCL_PROTO'].lower()},"
                         f"{_channels(knobs)},{nnodes},{nranks},-1,-1")
    return "\n".join(lines) + "\n"


__all__ = ["env_file", "tuner_csv", "HEADER"]
