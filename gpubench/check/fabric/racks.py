"""Which rack (leaf switch) each node hangs from: from a topology file, or from Slurm's per-task variables.

A topology file is either Slurm's ``topology.conf`` or two columns, ``node rack``, a line each (the node column may
be a host list); ``#`` starts a comment in both. In ``topology.conf`` a switch with ``Nodes=`` is a rack
(``SwitchName=leaf1 Nodes=gpu[01-16]``), so is a block of Slurm's block plugin (``BlockName=b1 Nodes=…``); lines
with ``Switches=`` only are the levels above and name no rack. Parameter names are read in any case, as Slurm does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from gpubench.errors import UsageError
from gpubench.ranks.hostlist import expand

_FORMS = "give Slurm's topology.conf lines (SwitchName=leaf1 Nodes=gpu[01-16]) or 'node rack' lines"
_NAMES = ("switchname", "blockname")  # the keys that name a rack when the line also has Nodes=


def _pairs(line: str) -> list[tuple[str, str]]:
    """(node, rack) of one comment-free line, either form; ValueError says what is wrong with it."""
    words = line.split()
    if "=" not in line:
        if len(words) != 2:
            raise ValueError(f"{len(words)} words where 'node rack' has two")
        return [(node, words[1]) for node in expand(words[0], scontrol=False)]
    keys: dict[str, str] = {}
    for word in words:
        key, eq, value = word.partition("=")
        if not eq:
            raise ValueError(f"{word!r} is not a Key=value")
        keys[key.lower()] = value
    if "nodes" not in keys:
        return []  # an upper level (Switches=), or a setting such as BlockSizes=: no rack of its own
    rack = next((keys[k] for k in _NAMES if k in keys), None)
    if not rack:
        raise ValueError("Nodes= without the SwitchName= (or BlockName=) of their rack")
    if not keys["nodes"]:
        raise ValueError(f"the rack {rack} has an empty Nodes=")
    return [(node, rack) for node in expand(keys["nodes"], scontrol=False)]


def from_file(path: str | Path) -> dict[str, str]:
    """The rack of each node a topology file names; a file that cannot be read is a UsageError naming its line."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read the topology file {path}: {getattr(e, 'strerror', None) or e}") from None
    rack_of: dict[str, str] = {}
    line_of: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            for node, rack in _pairs(line):
                if rack_of.setdefault(node, rack) != rack:
                    # a node under two leaves has no one rack: the racks modes would pair it wrongly
                    raise ValueError(f"{node} is in {rack_of[node]} already (line {line_of[node]}), here in {rack}")
                line_of.setdefault(node, number)
        except (ValueError, UsageError) as e:
            raise UsageError(f"the topology file {path}, line {number}: {e}; {_FORMS}") from None
    if not rack_of:
        raise UsageError(f"the topology file {path} names no node's rack: {_FORMS}")
    return rack_of


def from_slurm(env: Mapping[str, str]) -> str | None:
    """This node's rack from Slurm's SLURM_TOPOLOGY_ADDR (``spine0.leaf3.gpu07``): the last switch before the node.

    Slurm writes the levels from the top switch down and ends with the node (SLURM_TOPOLOGY_ADDR_PATTERN
    ``switch.switch.node``), so the rack is the part before the last. None where Slurm names no switch above the
    node (no topology plugin: the address is the node's name alone).
    """
    parts = [p for p in (env.get("SLURM_TOPOLOGY_ADDR") or "").strip().split(".") if p]
    return parts[-2] if len(parts) >= 2 else None


def missing(nodes: Iterable[str], rack_of: Mapping[str, str]) -> list[str]:
    """The nodes ``rack_of`` gives no rack, in their order."""
    return [n for n in nodes if not rack_of.get(n)]


__all__ = ["from_file", "from_slurm", "missing"]
