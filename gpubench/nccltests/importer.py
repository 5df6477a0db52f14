"""``gpubench import nccl-tests FILE...``: logs → one run directory with a ``comm.parquet`` table.

Every file is read and checked before the directory is made, so a bad log leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpubench import commtable, results
from gpubench.errors import UsageError
from gpubench.nccltests import convert, identity
from gpubench.nccltests.model import ParseError, Run
from gpubench.nccltests.parse_json import parse_json
from gpubench.nccltests.parse_text import parse_text
from gpubench.rundir import RunDir, check_label


@dataclass
class Imported:
    run_dir: RunDir
    runs: list[Run]
    rows: int
    warnings: list[str] = field(default_factory=list)


def read(path: str | os.PathLike, *, collective: str | None = None, tool: str = "nccl-tests") -> list[Run]:
    """The runs of one log file: nccl-tests ``-J`` JSON when it starts with ``{``, else text."""
    source = str(path)
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as e:
        raise UsageError(f"cannot read {source}: {e.strerror or e}") from e
    head = text.lstrip()[:1]
    if head == "{":
        return parse_json(text, source, collective=collective)
    if head == "[":
        raise ParseError(source, 1, "rccl-tests' -x/-Z report files are not read (their size is the receive "
                                    "size, not the table's); import the text log instead")
    return parse_text(text, source, collective=collective, tool=tool)


def default_cluster(runs: list[Run]) -> str:
    """The host of rank 0 of the first run (as `gpubench run` defaults to its own host), made a safe label."""
    for run in runs:
        if run.devices:
            host = min(run.devices, key=lambda d: d.rank).host.split(".")[0]
            label = re.sub(r"[^A-Za-z0-9._-]", "-", host).lstrip("._-")[:64]
            if label:
                return label
    return "imported"


def import_logs(paths: list[str], *, tool: str, out: str, cluster: str | None, collective: str | None,
                argv: list[str], env: dict[str, str] | None = None,
                method: dict[str, Any] | None = None) -> Imported:
    """Import nccl-tests/rccl-tests logs as one run. ``env`` and ``method`` (comm method columns such as
    ``register``) are what gpubench knows of binaries it started itself and the logs do not print."""
    warnings: list[str] = []
    runs: list[Run] = []
    files = []
    for path in paths:
        found = read(path, collective=collective, tool=tool)
        detected = {r.tool for r in found if r.tool_detected}
        if detected and detected != {tool}:
            warnings.append(f"{path} looks like {' and '.join(sorted(detected))} output, not {tool}: imported as "
                            "the log says")
        if not found:
            raise ParseError(path, None, f"no {tool} run in this file (no '# nThread' line or result table)")
        data = Path(path).read_bytes()
        kind = "json" if (found[0].generation or "").startswith("json") else "text"
        files.append({"path": str(path), "sha256": hashlib.sha256(data).hexdigest(), "format": kind,
                      "runs": len(found)})
        runs.extend(found)
    for run in runs:
        if not run.rows:
            warnings.append(f"{run.source}:{run.line}: a run with no result rows (did it fail? "
                            f"{'; '.join(run.errors) or 'no error printed'})")
    label = check_label(cluster or default_cluster(runs))
    fp = identity.fingerprint(runs, label)
    if env:  # the NCCL/RCCL settings the binaries ran with, when gpubench started them (a text log has none)
        fp["volatile"]["env"] = {**env, **fp["volatile"]["env"]}
    # Convert everything before the directory exists: a row that fails its check stops the import here.
    staged = []
    for i, run in enumerate(runs):
        rows = convert.comm_rows(run)
        staged.append([{**r, "import_run": i} for r in rows])
        # The footer counts the placements the tool found wrong; the rows should say the same.
        invalid = len({(r["source"], r["inplace"]) for r in rows if r["status"] == "invalid"})
        if run.rows and run.out_of_bounds is not None and run.out_of_bounds != invalid:
            warnings.append(f"{run.source}:{run.line}: the footer counts {run.out_of_bounds} out-of-bounds "
                            f"result(s), the rows show {invalid} (a printed error close to the bound?)")
    total = sum(len(s) for s in staged)
    if not total:
        raise UsageError(f"no result rows in {', '.join(paths)}: nothing to import")
    meta = {
        "argv": argv,
        "backend": fp["identity"]["backend"],
        "suites": {commtable.SUITE: {"version": commtable.SUITE_VERSION}},
        "imported": {
            "tool": tool,
            "tools": sorted({r.tool for r in runs}),
            "versions": sorted({r.version or f"unknown ({r.generation} format)" for r in runs if r.rows}),
            "files": files,
            "runs": [r.summary() for r in runs],
        },
        "fingerprint": fp,
    }
    rd = RunDir.create(out, label, meta)
    base = {"run_id": rd.run_id, "cluster": label, "backend": fp["identity"]["backend"]}
    rows: list[dict[str, Any]] = []
    for run, staged_rows in zip(runs, staged):
        first = min(run.devices, key=lambda d: d.rank) if run.devices else None
        where = {"device": first.name if first else None, "host": first.host if first else None}
        rows.extend({**base, **where, **r, **(method or {})} for r in staged_rows)
    df = results.frame(rows, commtable.PARAMS)
    rd.meta["suites"][commtable.SUITE]["cases"] = int(df["case"].nunique())
    rd.write_table(commtable.SUITE, df)
    rd.finish("complete", cases_done=int(df["case"].nunique()))
    return Imported(rd, runs, len(df), warnings)
