"""A row is built once (gpubench.run.rows) and changed afterwards through one function, amend; what a reader acts on
(a case a Ctrl-C abandoned) is a column, not the message's words."""

from __future__ import annotations

import pytest

from gpubench import results
from gpubench.results.rundir import ABANDONED, kept
from gpubench.run import rows
from gpubench.suite import TIME, Case


def _row(**columns):
    row = rows.figure({"run_id": "r", "backend": "fake"}, "s", 1, Case.of(n=1), TIME, [1.0, 2.0, 3.0])
    return rows.finish({**row, **columns}, columns.pop("status", "ok"), "")


def test_amend_changes_known_columns_adds_notes_and_refuses_what_the_schema_does_not_know():
    row = _row(message="first")
    out = rows.amend(row, contended="pid 7 (python3)", note="run interrupted: over the cases measured")
    assert out["contended"] == "pid 7 (python3)" and row.get("contended") is None  # a new row: the old one stands
    assert out["message"] == "first; run interrupted: over the cases measured"
    with pytest.raises(KeyError, match="contendd"):
        rows.amend(row, contendd="x")
    with pytest.raises(ValueError, match="status 'lost'"):
        rows.amend(row, status="lost")


def test_an_abandoned_case_is_a_column_whatever_its_message_says(tmp_path):
    measured = _row()
    gone = rows.amend(_row(status="skipped"), status="skipped", stop="abandoned", message="stopped; " + ABANDONED)
    words = rows.amend(_row(), message=ABANDONED)  # a measured case whose message happens to read the same
    assert rows.abandoned(gone) and not rows.abandoned(words)
    for name, table, want in (("a", [measured, rows.amend(gone, case="n=2")], 1),  # its words joined with a note
                              ("b", [measured, rows.amend(words, case="n=3")], 2)):  # words alone are no field
        results.save(results.frame(table, ("n",)), tmp_path / name / "s.parquet")
        assert kept(tmp_path / name) == want, name
