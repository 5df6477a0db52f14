"""Parsing nccl-tests / rccl-tests logs of every generation into Run objects, and the failures that name the line."""

import json
import math
from pathlib import Path

import pytest

from gpubench.nccltests import ParseError, parse_json, parse_text
from gpubench.nccltests import envscrub, model
from gpubench.nccltests.parse_text import strip_prefix
from gpubench.suites.comm.importer import comm_rows
from gpubench.suites.comm.importer import read

FIX = Path(__file__).parent / "fixtures" / "nccl-tests"


def runs_of(name, **kw):
    return read(FIX / name, **kw)


# file → (tool, version, collective, how it was known, world size, nodes, generation, NCCL, rows, avg busbw, OOB)
EXPECTED = {
    "nt-2.19.6-all_reduce-h200x2.txt":
        ("nccl-tests", "2.19.6", "all_reduce", "log", 2, 1, "2.13+", "2.28.9", 14, 236.38, 0),
    "nt-2.19.6-all_reduce-h200x2.json":
        ("nccl-tests", None, "all_reduce", "log", 2, 1, "json-v3", "2.28.9", 14, 236.379546, 0),
    "nt-2.19.6-alltoall-h200x2.txt":
        ("nccl-tests", "2.19.6", "alltoall", "log", 2, 1, "2.13+", "2.28.9", 14, 217.518, 0),
    "pre2.13-all_reduce-2x8-error-column.txt":
        ("nccl-tests", None, "all_reduce", "table", 16, 2, "pre-2.13", "2.10.3+cuda11.4", 12, 139.936, 16),
    "pre2020-all_gather-6wide-type.txt":
        ("nccl-tests", None, "all_gather", "hint", 8, 1, "pre-2.13", None, 18, 98.4688, 0),
    "nt-2.15-reduce_scatter-2x8-nccl-info.txt":
        ("nccl-tests", None, "reduce_scatter", "table", 16, 2, "2.13+", "2.21.5+cuda12.4", 18, None, 0),
    "nt-2.18.2-all_reduce-unalign-c0.txt":
        ("nccl-tests", "2.18.2", "all_reduce", "log", 8, 1, "2.13+", "2.28.7", 22, 137.856, 0),
    "nt-2.19.6-all_reduce-per-iter-timestamps.txt":
        ("nccl-tests", "2.19.6", "all_reduce", "log", 2, 2, "2.13+", "2.28.9", 8, 1.14197, 0),
    "nt-2.17.6-all_gather-2x8-json-v1.json":
        ("nccl-tests", None, "all_gather", "log", 16, 2, "json-v1", "2.27.3", 8, None, 0),
    "rccl-develop-all_reduce-2x8-M1.txt":
        ("rccl-tests", "develop:448c4c7", "all_reduce", "log", 16, 2, "2.13+", "2.22.3-develop:7d8d67c", 12, 210.671, 0),
    "rccl-2023-all_reduce-nthreads-colon.txt":
        ("rccl-tests", None, "all_reduce", "table", 4, 1, "pre-2.13", None, 8, None, 1),
    "rccl-all_gather-in-place-only.txt":
        ("rccl-tests", "develop:5272cd1", "all_gather", "log", 8, 1, "2.13+", None, 4, 253.057, 0),
    "rccl-2.17.9-sync-all_reduce-version-line.txt":
        ("rccl-tests", "2.17.9-develop:f220897c9b", "all_reduce", "log", 8, 1, "2.13+", "2.28.3", 12, None, 0),
    "mpirun-tag-output-2.16-all_reduce.txt":
        ("nccl-tests", None, "all_reduce", "table", 16, 2, "2.13+", None, 16, 171.157, 0),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_generation_parses(name):
    tool, version, coll, how, world, nodes, gen, nccl, nrows, avg, oob = EXPECTED[name]
    (run,) = runs_of(name)
    assert (run.tool, run.version, run.collective, run.collective_source) == (tool, version, coll, how)
    assert (run.world_size, run.nnodes, run.generation, run.nccl_version) == (world, nodes, gen, nccl)
    assert len(run.rows) == nrows and run.out_of_bounds == oob
    if avg is not None:
        assert run.avg_busbw == avg
    assert comm_rows(run)  # every row passes the busbw check


def test_config_line_of_each_generation():
    new = runs_of("nt-2.19.6-all_reduce-h200x2.txt")[0].config
    assert new == {"json_output": "out/nt_all_reduce.json", "nthreads": 1, "ngpus": 2, "min_bytes": 1048576,
                   "max_bytes": 8589934592, "step": 4, "step_kind": "factor", "warmup_iters": 5, "iters": 20,
                   "agg_iters": 1, "validation": 1, "graph": 0, "unalign": 0, "nccl_headers": 22809}
    old = runs_of("pre2.13-all_reduce-2x8-error-column.txt")[0].config
    assert old == {"nthreads": 1, "ngpus": 1, "min_bytes": 1048576, "max_bytes": 1073741824, "step": 4,
                   "step_kind": "factor", "warmup_iters": 5, "iters": 20, "validation": 1}
    colon = runs_of("rccl-2023-all_reduce-nthreads-colon.txt")[0].config
    assert colon["ranks_per_gpu"] == 1 and colon["warmup_iters"] == 5 and colon["iters"] == 20
    per_iter = runs_of("nt-2.19.6-all_reduce-per-iter-timestamps.txt")[0].config
    assert per_iter["per_iter_timing"] is True and per_iter["timestamps"] is True


def test_devices_world_size_and_hosts():
    run = runs_of("nt-2.18.2-all_reduce-unalign-c0.txt")[0]  # -g 8 in one process: 8 lines, one pid
    assert [d.rank for d in run.devices] == list(range(8)) and {d.pid for d in run.devices} == {2211}
    assert run.devices[3].bus == "0000:5d:00" and run.devices[3].name == "NVIDIA H200"
    old = runs_of("rccl-2023-all_reduce-nthreads-colon.txt")[0]
    assert old.devices[0].group is None and old.devices[0].bus == "0000:63:00.0"
    assert old.hostnames == ["sharbox-ultra"]


def test_nccl_tests_split_groups_count_rank_zeros_group():
    text = (FIX / "nt-2.19.6-alltoall-h200x2.txt").read_text()
    text = text.replace("#  Rank  1 Group  0", "#  Rank  1 Group  1").replace(
        "#  Rank  1 Group  1 Pid   1864 on         vm device  1 [0000:00:07] NVIDIA H200",
        "#  Rank  1 Group  1 Pid   1864 on         vm device  1 [0000:00:07] NVIDIA H200\n"
        "#  Rank  2 Group  0 Pid   1864 on        vm2 device  0 [0000:00:06] NVIDIA H200")
    (run,) = parse_text(text, "split.txt")
    assert run.world_size == 2 and run.nnodes == 2  # ranks 0 and 2 form group 0


def test_row_fields_and_number_formats():
    (run,) = runs_of("nt-2.19.6-all_reduce-per-iter-timestamps.txt")
    last = run.rows[-2]  # 16 GiB out-of-place: times of 15 s print as 1.5e+07
    assert (last.size, last.count, last.type, last.redop, last.root, last.placement) == \
        (17179869184, 4294967296, "float", "sum", -1, "out")
    assert last.time_us == 1.5e7 and last.time_tol == 5e5 and last.algbw == 1.14 and last.algbw_tol == 0.005
    assert last.extra == {"i_min": 1.5e7, "i_max": 1.6e7, "i_p99": 1.6e7, "i_cv%": 2.31,
                          "timestamp": "2026-11-20 09:18:44"}
    (m1,) = runs_of("rccl-develop-all_reduce-2x8-M1.txt")
    assert m1.rows[0].extra == {"algo": "Tree", "proto": "LL128", "nchannels": 64}
    assert m1.config["fp8_fnuz"] is True and m1.config["hip_version"] == "6.3.42131-fa1d09cbd"


def test_validation_columns():
    wrong = runs_of("nt-2.19.6-alltoall-h200x2.txt")[0].rows
    assert [r.wrong for r in wrong[:2]] == [0, None]  # in-place alltoall prints N/A even with -c 1
    old = runs_of("pre2.13-all_reduce-2x8-error-column.txt")[0].rows
    assert old[0].wrong is None and old[0].error == 2e-7 and old[8].error == 3e-3
    star = [r for r in runs_of("rccl-2023-all_reduce-nthreads-colon.txt")[0].rows if r.flagged]
    assert len(star) == 1 and star[0].error == 0.2 and star[0].placement == "in"


def test_one_placement_tables():
    (run,) = runs_of("rccl-all_gather-in-place-only.txt")
    assert {r.placement for r in run.rows} == {"in"} and run.rows[0].redop == "none"
    # -O 1: the group line says out-of-place; the same columns.
    text = (FIX / "rccl-all_gather-in-place-only.txt").read_text().replace("           in-place", "       out-of-place")
    (run,) = parse_text(text, "o.txt")
    assert {r.placement for r in run.rows} == {"out"} and len(run.rows) == 4


def test_timestamp_column_without_per_iteration_columns():
    lines = (FIX / "nt-2.19.6-all_reduce-h200x2.txt").read_text().splitlines()
    lines[10] += "          timestamp"
    lines[11] += "  %Y-%m-%d %H:%M:%S"
    for i in range(12, 19):
        lines[i] += "  2026-11-21 09:14:%02d" % i
    (run,) = parse_text("\n".join(lines), "s.txt")
    assert run.config["timestamps"] is True and len(run.rows) == 14
    assert run.rows[-1].extra == {"timestamp": "2026-11-21 09:14:18"} and run.rows[-1].busbw == 344.64


@pytest.mark.parametrize("prefix", ["[1,0]<stdout>:", "[1,0]<stderr>:", "0: ", " 3: ", "[0] "])
def test_launcher_prefixes_are_stripped(prefix):
    text = "".join(prefix + line + "\n" for line in (FIX / "nt-2.19.6-all_reduce-h200x2.txt").read_text().splitlines())
    (run,) = parse_text(text, "p.txt")
    assert len(run.rows) == 14 and run.world_size == 2
    assert strip_prefix("  1048576  262144  float") == "  1048576  262144  float"


def test_foreign_lines_are_skipped_but_an_unknown_prefix_before_a_row_is_an_error():
    lines = (FIX / "nt-2.19.6-all_reduce-h200x2.txt").read_text().splitlines()
    noisy = lines[:13] + ["", "vm:1797:1810 [0] NCCL INFO Channel 00/24 : 0 1", "MPI warning: something"] + lines[13:]
    assert len(parse_text("\n".join(noisy), "n.txt")[0].rows) == 14
    hidden = lines[:13] + ["vm-node1| " + lines[13]] + lines[14:]
    with pytest.raises(ParseError, match=r"h.txt:14: a result row behind a line prefix"):
        parse_text("\n".join(hidden), "h.txt")


def test_glued_rccl_algo_name_is_split():
    text = (FIX / "rccl-develop-all_reduce-2x8-M1.txt").read_text()
    row = [x for x in text.splitlines() if x.strip().startswith("1048576 ")][0]
    glued = row.replace("      0    Tree     LL128", "      0CollNetDirect     LL128")
    (run,) = parse_text(text.replace(row, glued), "g.txt")
    assert run.rows[0].extra["algo"] == "CollNetDirect" and run.rows[1].wrong == 0


def test_fnuz_fp8_maps_to_the_fnuz_dtype():
    text = (FIX / "rccl-develop-all_reduce-2x8-M1.txt").read_text().replace("bfloat16", "fp8_e4m3")
    (run,) = parse_text(text, "f.txt")
    assert {r["dtype"] for r in comm_rows(run)} == {"float8_e4m3fnuz"}


def test_several_runs_in_one_log():
    runs = runs_of("srun-label-two-runs-2.17.txt")
    assert [r.collective for r in runs] == ["all_reduce", "all_gather"]
    assert [r.line for r in runs] == [3, 41] and all(len(r.rows) == 16 for r in runs)


def test_collective_needs_the_user_when_the_table_is_ambiguous():
    text = "\n".join((FIX / "pre2020-all_gather-6wide-type.txt").read_text().splitlines()[1:])
    with pytest.raises(ParseError, match="fits all_gather or hypercube: pass --collective NAME"):
        parse_text(text, "ag.txt")
    assert parse_text(text, "ag.txt", collective="all_gather")[0].collective_source == "user"
    with pytest.raises(ParseError, match="--collective all_reduce does not fit this table"):
        parse_text(text, "ag.txt", collective="all_reduce")


@pytest.mark.parametrize("text,why", [
    ("# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
     "#  bytes             N    type      op    time  algbw  busbw      res    time  algbw  busbw      res\n",
     "nccl-tests 1.x output"),
    ("# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
     "           8             2   float     sum    10.00    0.00    0.00  0e+00    10.00    0.00\n",
     "a result row before any table header, and its fields fit no column layout"),
    ("# nThread 1 nGpus 1\n", "unreadable run configuration"),
    ("#  Rank  0 Group  0 Pid 12 on h device 0 [00] X\n#  Rank  1 Group  0 Pid 12 on h devi...\n",
     "device list cut short"),
])
def test_unknown_formats_name_the_line(text, why):
    with pytest.raises(ParseError, match=why) as e:
        parse_text(text, "x.txt")
    assert e.value.source == "x.txt" and isinstance(e.value.line, int)


def test_a_data_row_that_does_not_read_is_an_error():
    lines = (FIX / "nt-2.19.6-all_reduce-h200x2.txt").read_text().splitlines()
    for bad, why in ((lines[14].replace("float", "float4"), "unknown data type 'float4'"),
                     (lines[14].replace("214.16", "2l4.16", 1), "algbw '2l4.16' is not a number"),
                     (lines[14].replace("  sum  ", "  xor  "), "unknown reduction 'xor'"),
                     (lines[14] + "  17", "14 fields where the header declares 13")):
        with pytest.raises(ParseError, match=why) as e:
            parse_text("\n".join(lines[:14] + [bad] + lines[15:]), "r.txt")
        assert e.value.line == 15 and e.value.text == bad


def test_unknown_header_column_is_an_error():
    text = (FIX / "nt-2.19.6-all_reduce-h200x2.txt").read_text().replace("#wrong     time", "#wrong    speed")
    with pytest.raises(ParseError, match="unknown column 'speed'"):
        parse_text(text, "c.txt")


def test_one_rank_zero_per_process_means_a_binary_without_mpi():
    # NVIDIA/nccl-tests#107: mpirun started a non-MPI build twice; each process printed its own header.
    head = "# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n#\n" \
           "# Using devices\n"
    text = head + head + "#   Rank  0 Pid  1320 on ip-a device  0 [0x00] Tesla V100-SXM2-16GB\n" \
                         "#   Rank  0 Pid  2066 on ip-b device  0 [0x00] Tesla V100-SXM2-16GB\n"
    with pytest.raises(ParseError, match="rank 0 is listed 2 times.*MPI=1"):
        parse_text(text, "dup.txt")


def test_tool_and_nccl_versions_from_banners():
    text = (FIX / "nt-2.19.6-all_reduce-h200x2.txt").read_text().replace(
        "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809",
        "# nccl-tests version 2.20.0 (b4d5bee) nccl-headers=23102 nccl-library=23102")
    (run,) = parse_text(text, "v.txt")
    assert (run.version, run.config["git"], run.nccl_version) == ("2.20.0", "b4d5bee", "2.31.2")


def test_json_quirks():
    doc = json.loads((FIX / "nt-2.19.6-all_reduce-h200x2.json").read_text())
    doc["results"][0]["out_of_place"] = None  # trace replay: in-place only
    doc["results"][1]["in_place"]["time"] = "nan"
    (run,) = parse_json(json.dumps(doc), "q.json")
    assert [r.placement for r in run.rows[:2]] == ["in", "out"]
    nan_row = [r for r in run.rows if r.line == 2 and r.placement == "in"][0]
    assert math.isnan(nan_row.time_us) and run.config["blocking"] is False
    v1 = runs_of("nt-2.17.6-all_gather-2x8-json-v1.json")[0]
    assert v1.avg_busbw == json.loads((FIX / "nt-2.17.6-all_gather-2x8-json-v1.json").read_text())[
        "average_bus_bandwidith"]["bandwidith"]
    assert all(r.wrong is None for r in v1.rows) and v1.hostnames == ["ndv5-0001", "ndv5-0002"]


@pytest.mark.parametrize("text,why", [
    ('{"version": 9, "results": []}', "JSON format version 9 is not known"),
    ('{"version": 3}', "no \"results\" list"),
    ('{"version": 3,\n "results": [\n  {"size": }]}', r"j.json:3: not valid JSON"),
    ('{"version": 3, "results": [{"size": 8}]}', r"results\[0\]: unreadable result"),
])
def test_bad_json_is_an_error(text, why):
    with pytest.raises(ParseError, match=why):
        parse_json(text, "j.json")


def test_printed_numbers_carry_their_rounding():
    assert model.figure("70.62") == (70.62, 0.005)
    assert model.figure("12439.2") == (12439.2, 0.05)
    assert model.figure("12816") == (12816.0, 0.5)
    assert model.figure("1.2e+04") == (12000.0, 500.0)
    assert model.figure("2e-07") == (2e-07, 0.5e-07)
    assert math.isnan(model.figure("-nan")[0]) and model.figure("12o.3") is None
    assert model.count("1.23457e+06") == 1234570 and model.count("N/A") is None


def test_env_scrub_keeps_only_harmless_nccl_settings():
    env = ["NCCL_IB_HCA==mlx5_0:1", "NCCL_IB_PKEY=0", "NCCL_NET_TOKEN=x", "RCCL_API_KEY=y", "HOME=/root",
           "NCCL_X=abcdefghijklmnopqrstuvwxyz0123456789", "NCCL_TOPO_FILE=/opt/nccl/topo-ndv5-2x8.xml",
           "NCCL_URL=http://u:p@h", "RCCL_MSCCL_ENABLE=0", "NCCL_NOVALUE"]
    assert envscrub.scrub(env) == {"NCCL_IB_HCA": "=mlx5_0:1", "NCCL_IB_PKEY": "0",
                                   "NCCL_TOPO_FILE": "/opt/nccl/topo-ndv5-2x8.xml", "RCCL_MSCCL_ENABLE": "0"}


def test_rccl_2019_2022_config_line_with_colons():
    # rccl-tests 924521f..6156759 printed "# nThread: %d nGpus: %d minBytes: %ld ... warmupIters: %d ...".
    text = (FIX / "rccl-2023-all_reduce-nthreads-colon.txt").read_text().replace(
        "# nThreads: 1 nGpus: 4 nRanks: 1 minBytes: 8", "# nThread: 1 nGpus: 4 minBytes: 8").replace(
        "# Errors with asterisks indicate errors that have exceeded the maximum threshold.\n", "").replace(
        "[0000:", "[0x").replace(":00.0]", "]").replace("2e-01*", "2e-01")
    (run,) = parse_text(text, "c.txt")
    assert run.tool == "rccl-tests" and run.tool_detected  # the colons alone tell it
    assert (run.config["nthreads"], run.config["ngpus"], run.config["iters"]) == (1, 4, 20)
    assert "ranks_per_gpu" not in run.config and len(run.rows) == 8


def test_nccl_version_codes_of_both_encodings():
    from gpubench.nccltests.model import nccl_version

    assert nccl_version(22809) == "2.28.9" and nccl_version(21003) == "2.10.3"
    assert nccl_version(2708) == "2.7.8"  # before 2.9 the code was major*1000 + minor*100 + patch
