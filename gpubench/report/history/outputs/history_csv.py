"""history-csv (``gpubench export DIR --format history-csv``): the history document's series as rows, for
Grafana or a notebook: one row per figure and night (or point, where nights are aggregated) that measured it."""

from __future__ import annotations

import csv
import io
from typing import Any

CSV_COLUMNS = ("time", "run_id", "last_run_id", "nights", "suite", "case", "metric", "unit", "better", "median",
               "q1", "q3", "n", "band_low", "band_high", "gate", "since", "worse_nights", "change",
               "accepted_reason", "accepted_by", "hollow", "changes")


def _csv_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for fig in doc["figures"]:
        marks = {k: {m["night"]: m for m in fig[k]} for k in ("worse", "recovered", "accepted", "versions")}
        for i, night in enumerate(doc["nights"]):
            if fig["median"][i] is None:
                continue
            worse, accepted = marks["worse"].get(i, {}), marks["accepted"].get(i, {})
            changes = night["changes"].get(fig["suite"], []) + \
                ([marks["versions"][i]["text"]] if i in marks["versions"] else [])
            rows.append({
                "time": night["time"], "run_id": night["run_id"], "last_run_id": night.get("last_run_id", ""),
                "nights": night.get("nights", 1), "suite": fig["suite"], "case": fig["case"],
                "metric": fig["metric"], "unit": fig["unit"], "better": fig["better"], "median": fig["median"][i],
                "q1": fig["q1"][i], "q3": fig["q3"][i], "n": fig["n"][i], "band_low": fig["low"][i],
                "band_high": fig["high"][i],
                "gate": "WORSE" if worse else ("recovered" if i in marks["recovered"] else ""),
                "since": worse.get("since"), "worse_nights": worse.get("nights"), "change": worse.get("change"),
                "accepted_reason": accepted.get("reason"), "accepted_by": accepted.get("by"),
                "hollow": night["hollow"], "changes": "; ".join(changes)})
    return rows


def history(doc: dict[str, Any]) -> str:
    """One row per figure and night (or point, where nights are aggregated) that measured it."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(_csv_rows(doc))
    return out.getvalue()


__all__ = ["history", "CSV_COLUMNS"]
