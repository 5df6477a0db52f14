"""Pastes the importer used to refuse or misread (issue 45): result rows without a table header, a footer average
printed with fewer digits than the rows' mean, and command lines above a table that name its collective.

The shapes are built from the fixture logs of every generation (tests/fixtures/nccl-tests/); the real published
logs these rules were written for are read in test_nccltests_public.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench.nccltests.model import ParseError
from gpubench.nccltests.parse_text import parse_text, strip_prefix
from gpubench.suites.comm.importer import _notes, comm_rows

FIX = Path(__file__).parent / "fixtures" / "nccl-tests"
PUBLIC = FIX / "public"


def _rows(run):
    return [(r.size, r.count, r.type, r.redop, r.root, r.placement, r.time_us, r.algbw, r.busbw, r.wrong, r.error,
             r.extra) for r in run.rows]


def _headerless(text: str) -> str:
    """The log as pasted from its first result row on: every '#' line above the rows cut off."""
    lines = text.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.split() and strip_prefix(ln).split()[0].isdigit()
                 and not strip_prefix(ln).lstrip().startswith("#"))
    return "\n".join(ln for i, ln in enumerate(lines) if i >= first or not strip_prefix(ln).lstrip().startswith("#"))


def _public(name: str) -> str:
    return "\n".join(ln for ln in (PUBLIC / name).read_text().splitlines() if not ln.startswith("## fixture:"))


@pytest.mark.parametrize("name,generation", [
    ("nt-2.19.6-all_reduce-h200x2.txt", "2.13+"),
    ("nt-2.19.6-all_reduce-per-iter-timestamps.txt", "2.13+"),  # -I 1 -S 1: per-iteration columns, timestamp
    ("nt-2.15-reduce_scatter-2x8-nccl-info.txt", "2.13+"),  # NCCL INFO lines between the rows
    ("pre2.13-all_reduce-2x8-error-column.txt", "pre-2.13"),  # redop without root, the error column
    ("pre2020-all_gather-6wide-type.txt", "pre-2.13"),  # neither redop nor root; algbw = (n-1)/n size / time
    ("rccl-2023-all_reduce-nthreads-colon.txt", "pre-2.13"),  # rccl-tests' error column with '*'
    ("rccl-develop-all_reduce-2x8-M1.txt", "2.13+"),  # rccl-tests -M 1: algo proto nchannels
    ("mpirun-tag-output-2.16-all_reduce.txt", "2.13+"),  # every line behind [1,0]<stdout>:
])
def test_rows_without_their_header_read_as_with_it(name, generation):
    text = (FIX / name).read_text()
    (full,) = parse_text(text, name)
    (cut,) = parse_text(_headerless(text), name, ranks=full.world_size)
    assert _rows(cut) == _rows(full) and cut.generation == generation
    assert cut.collective == full.collective and cut.config["header_from_rows"].startswith("size  count  type")
    assert comm_rows(cut)  # every row passes the busbw check
    assert any("no table header above the rows" in n for n in _notes(cut))


def test_rows_without_a_header_settle_the_collective_and_the_world_from_the_table():
    text = (FIX / "nt-2.19.6-all_reduce-h200x2.txt").read_text()
    (run,) = parse_text(_headerless(text), "cut.txt")
    assert (run.collective, run.collective_source, run.world_size) == ("all_reduce", "table", 2)
    assert run.config["world_size_from"].startswith("busbw / algbw = 1.0000 = 2 (n - 1) / n")


def test_rows_of_one_placement_without_a_header_are_refused_in_one_line():
    text = _headerless((FIX / "rccl-all_gather-in-place-only.txt").read_text())
    with pytest.raises(ParseError, match="one placement without a table header.*paste the table's header"):
        parse_text(text, "o.txt", ranks=8)


def test_a_headerless_row_that_fits_no_layout_or_not_the_rows_above_is_named():
    lines = _headerless((FIX / "nt-2.19.6-all_reduce-h200x2.txt").read_text()).splitlines()
    rows = [i for i, ln in enumerate(lines) if ln.split() and ln.split()[0].isdigit()]
    cut = lines[:rows[0]] + [" ".join(lines[rows[0]].split()[:10])] + lines[rows[0] + 1:]
    with pytest.raises(ParseError, match="fit no column layout") as e:
        parse_text("\n".join(cut), "x.txt")
    assert e.value.line == rows[0] + 1
    # a pre-2.13 row (no root column, error) among 2.13+ rows
    odd = lines[:rows[2]] + ["     4194304       1048576     float     sum    75.57   55.50  104.07  1e-06    73.54"
                             "   57.04  106.94  2e-07"] + lines[rows[2] + 1:]
    with pytest.raises(ParseError, match="does not read as the rows above it do") as e:
        parse_text("\n".join(odd), "x.txt")
    assert e.value.line == rows[2] + 1


def test_headerless_rows_then_a_whole_run_are_two_runs():
    one = _headerless((FIX / "nt-2.19.6-all_reduce-h200x2.txt").read_text())
    two = (FIX / "nt-2.18.2-all_reduce-unalign-c0.txt").read_text()
    runs = parse_text(one + "\n" + two, "two.txt")
    assert [(r.world_size, len(r.rows), r.version) for r in runs] == [(2, 14, None), (8, 22, "2.18.2")]


def test_interleaved_tables_of_one_rank_jobs_are_refused_with_the_reason():
    lines = _headerless((FIX / "nt-2.19.6-all_reduce-h200x2.txt").read_text()).splitlines()
    rows = [i for i, ln in enumerate(lines) if ln.split() and ln.split()[0].isdigit()]
    swapped = list(lines)
    swapped[rows[3]], swapped[rows[4]] = lines[rows[4]], lines[rows[3]]
    with pytest.raises(ParseError, match="several processes' tables interleaved.*MPI=1") as e:
        parse_text("\n".join(swapped), "x.txt")
    assert e.value.line == rows[4] + 1
    # a second sweep from the first size (another data type, -d all) is one run's
    again = lines[:rows[-1] + 1] + [lines[r] for r in rows] + lines[rows[-1] + 1:]
    (run,) = parse_text("\n".join(again), "x.txt")
    assert len(run.rows) == 4 * len(rows)


def test_the_footer_average_is_compared_within_its_printed_digits():
    runs = parse_text(_public("autodl-2080ti-x2-six-runs-prompt-lines-one-gpu-footer.txt"), "autodl.txt")
    one_gpu = runs[4]
    assert (one_gpu.world_size, one_gpu.avg_busbw, one_gpu.avg_busbw_tol) == (1, 202818.0, 0.5)
    assert sum(r.busbw for r in one_gpu.rows) / len(one_gpu.rows) == pytest.approx(202818.204, abs=1e-3)
    assert not [n for r in runs for n in _notes(r) if "missing" in n]
    one_gpu.rows = one_gpu.rows[:-2]  # the largest size's row lost, as a truncated paste loses it
    assert any("rows are missing from this log" in n for n in _notes(one_gpu))


@pytest.mark.parametrize("command,collective", [
    ("kubectl exec host-1 -it -- /usr/local/gib/scripts/run_nccl_tests.sh -t alltoall -b 1K -e 8G h1 h2", "alltoall"),
    ("Running: /opt/nccl-tests/build/alltoall_perf -b 8 -e 8G -f 2 -g 1", "alltoall"),
    ("# mpirun -np 2 ./build/all_gather_perf -b 8 -e 1G", "all_gather"),  # a root prompt, or a script's comment
    ("srun --mpi=pmix all_gather_perf_mpi -b 8", "all_gather"),
])
def test_a_command_line_above_a_table_names_its_collective(command, collective):
    text = (FIX / "nt-2.19.6-alltoall-h200x2.txt").read_text().replace("# Collective test starting: alltoall_perf\n",
                                                                        "")
    with pytest.raises(ParseError, match="fits all_gather, alltoall, alltoallv or hypercube: pass --collective"):
        parse_text(text, "a.txt")
    (run,) = parse_text(command + "\n" + text, "a.txt")
    assert (run.collective, run.collective_source) == (collective, "hint")
    # a line naming several (a loop over binaries) names none
    with pytest.raises(ParseError, match="pass --collective"):
        parse_text("for b in all_gather_perf alltoall_perf; do mpirun ./build/$b; done\n" + text, "a.txt")


def test_a_2_13_sendrecv_table_prints_a_reduction_and_is_not_taken_for_all_reduce():
    # sendrecv prints -o's reduction (sum) like all_reduce, but never checks in place (src/sendrecv.cu)
    lines = (FIX / "nt-2.19.6-all_reduce-h200x2.txt").read_text().replace(
        "# Collective test starting: all_reduce_perf\n", "").splitlines()
    rows = [i for i, ln in enumerate(lines) if ln.split() and ln.split()[0].isdigit()]
    sendrecv = list(lines)
    for i in rows:
        fields = lines[i].rsplit(None, 1)
        sendrecv[i] = fields[0] + "    N/A"
    (run,) = parse_text("\n".join(sendrecv), "s.txt")
    assert (run.collective, run.collective_source, run.world_size) == ("sendrecv", "table", 2)
    (run,) = parse_text("\n".join(lines), "a.txt")
    assert (run.collective, run.collective_source) == ("all_reduce", "table")
    unchecked = [ln.replace("      0", "    N/A") if i in rows else ln for i, ln in enumerate(lines)]
    with pytest.raises(ParseError, match="fits all_reduce or sendrecv: pass --collective"):
        parse_text("\n".join(unchecked), "c.txt")  # two ranks, validation off: busbw = algbw for both
    (run,) = parse_text((FIX / "nt-2.18.2-all_reduce-unalign-c0.txt").read_text().replace(
        "# Collective test starting: all_reduce_perf\n", ""), "c8.txt")
    assert (run.collective, run.collective_source) == ("all_reduce", "table")  # 8 ranks: busbw = 1.75 algbw
