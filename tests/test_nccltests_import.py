"""`gpubench import nccl-tests|rccl-tests FILE...`: every fixture becomes a run directory whose comm table holds
every printed figure exactly; bad logs exit 2 naming the line and write nothing."""

import json
import math
import re
from pathlib import Path

import pytest

from gpubench import results
from gpubench.suites.comm import table as commtable
from gpubench.cli import main
from gpubench.machine.fingerprint import identity_hash

FIX = Path(__file__).parent / "fixtures" / "nccl-tests"

# How each text fixture lays its rows out, written down here independently of the parser's header reading:
# (tool word, lead columns, fields per placement, placements, collective or None when the log names several).
TEXT = {
    "nt-2.19.6-all_reduce-h200x2.txt": ("nccl-tests", 5, 4, ("out", "in"), "all_reduce"),
    "nt-2.19.6-alltoall-h200x2.txt": ("nccl-tests", 5, 4, ("out", "in"), "alltoall"),
    "pre2.13-all_reduce-2x8-error-column.txt": ("nccl-tests", 4, 4, ("out", "in"), "all_reduce"),
    "pre2020-all_gather-6wide-type.txt": ("nccl-tests", 3, 4, ("out", "in"), "all_gather"),
    "nt-2.15-reduce_scatter-2x8-nccl-info.txt": ("nccl-tests", 5, 4, ("out", "in"), "reduce_scatter"),
    "nt-2.18.2-all_reduce-unalign-c0.txt": ("nccl-tests", 5, 4, ("out", "in"), "all_reduce"),
    "nt-2.19.6-all_reduce-per-iter-timestamps.txt": ("nccl-tests", 5, 8, ("out", "in"), "all_reduce"),
    "rccl-develop-all_reduce-2x8-M1.txt": ("rccl-tests", 5, 4, ("out", "in"), "all_reduce"),
    "rccl-2023-all_reduce-nthreads-colon.txt": ("rccl-tests", 4, 4, ("out", "in"), "all_reduce"),
    "rccl-all_gather-in-place-only.txt": ("rccl-tests", 5, 4, ("in",), "all_gather"),
    "rccl-2.17.9-sync-all_reduce-version-line.txt": ("rccl-tests", 5, 4, ("out", "in"), "all_reduce"),
    "mpirun-tag-output-2.16-all_reduce.txt": ("nccl-tests", 5, 4, ("out", "in"), "all_reduce"),
    "srun-label-two-runs-2.17.txt": ("nccl-tests", 5, 4, ("out", "in"), None),
}
JSON = {"nt-2.19.6-all_reduce-h200x2.json": "all_reduce", "nt-2.17.6-all_gather-2x8-json-v1.json": "all_gather"}
_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<stdout>:|\s*\d+: )")
_DATA = re.compile(r"^\s*\d+\s+\d+\s+(?:float|half|bfloat16)\s")


def do_import(tmp_path, tool, *files, extra=()):
    code = main(["import", tool, *map(str, files), "--out", str(tmp_path / "out"), "--cluster", "t", *extra])
    dirs = sorted((tmp_path / "out" / "t").glob("*")) if (tmp_path / "out" / "t").exists() else []
    return code, dirs


def printed_rows(path: Path, lead: int, width: int, placements, collective):
    """(line, collective, placement, time, algbw, busbw) read from the raw text by column position."""
    current = collective
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = _PREFIX.sub("", raw, count=1)
        if m := re.search(r"Collective test starting: (\w+?)_perf", line):
            current = current if collective else m.group(1)
        if not _DATA.match(line):
            continue
        tokens = line.split()
        for i, placement in enumerate(placements):
            at = lead + i * width
            yield lineno, current, placement, tokens[at], tokens[at + 1], tokens[at + 2]


@pytest.mark.parametrize("name", sorted(TEXT))
def test_text_import_keeps_every_printed_figure_exactly(tmp_path, name):
    tool, lead, width, placements, collective = TEXT[name]
    code, dirs = do_import(tmp_path, tool, FIX / name)
    assert len(dirs) == 1
    df = results.load(dirs[0])
    assert code == (1 if (df["status"] == "invalid").any() else 0)  # a result the tool found wrong fails, as in run
    expected = list(printed_rows(FIX / name, lead, width, placements, collective))
    assert expected and len(df) == 3 * len(expected)  # time, algbw, busbw for each placement printed
    for lineno, coll, placement, time, algbw, busbw in expected:
        rows = df[(df["source"] == f"{FIX / name}:{lineno}") & (df["inplace"] == (placement == "in"))]
        got = dict(zip(rows["metric"], rows["value"]))
        assert set(rows["collective"]) == {coll}
        assert got == {"time": float(time), "algbw": float(algbw), "busbw": float(busbw)}, (lineno, placement)
        assert all(s == [v] for s, v in zip(rows["samples"], rows["value"]))


@pytest.mark.parametrize("name", sorted(JSON))
def test_json_import_keeps_every_figure_exactly(tmp_path, name):
    code, dirs = do_import(tmp_path, "nccl-tests", FIX / name)
    assert code == 0
    df = results.load(dirs[0])
    doc = json.loads((FIX / name).read_text())
    n = 0
    for i, res in enumerate(doc["results"], 1):
        for key, inplace in (("out_of_place", False), ("in_place", True)):
            rows = df[(df["source"] == f"{FIX / name}:{i}") & (df["inplace"] == inplace)]
            got = dict(zip(rows["metric"], rows["value"]))
            body = res[key]
            assert got == {"time": body["time"], "algbw": body["alg_bw"], "busbw": body["bus_bw"]}
            assert set(rows["collective"]) == {JSON[name]} and set(rows["bytes"]) == {res["size"]}
            n += 1
    assert len(df) == 3 * n


def test_text_and_its_json_twin_give_the_same_rows(tmp_path):
    # The real 2.19.6 pair: same cases, same validity, figures equal within the text's print rounding.
    _, (text_dir,) = do_import(tmp_path / "a", "nccl-tests", FIX / "nt-2.19.6-all_reduce-h200x2.txt")
    _, (json_dir,) = do_import(tmp_path / "b", "nccl-tests", FIX / "nt-2.19.6-all_reduce-h200x2.json")
    key = ["case", "metric"]
    a = results.load(text_dir).set_index(key).sort_index()
    b = results.load(json_dir).set_index(key).sort_index()
    assert list(a.index) == list(b.index) and len(a) == 42
    for col in ("valid", "wrong", "world_size", "nnodes", "count", "root", "engine", "status"):
        assert list(a[col]) == list(b[col]), col
    for (case, metric), value in a["value"].items():
        digits = len(f"{value}".split(".")[1]) if "." in f"{value}" else 0
        assert abs(value - b.loc[(case, metric), "value"]) <= 0.5 * 10 ** -min(digits, 2) + 1e-9, (case, metric)


def test_run_json_records_the_import_and_a_fingerprint(tmp_path):
    files = [FIX / "nt-2.19.6-all_reduce-h200x2.txt", FIX / "nt-2.19.6-alltoall-h200x2.txt"]
    code = main(["import", "nccl-tests", *map(str, files), "--out", str(tmp_path)])
    assert code == 0
    (run_dir,) = (tmp_path / "vm").glob("*")  # default cluster: the host of rank 0 in the log
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "complete" and meta["argv"][:3] == ["gpubench", "import", "nccl-tests"]
    imported = meta["imported"]
    assert imported["tool"] == "nccl-tests" and imported["versions"] == ["2.19.6"]
    assert [f["path"] for f in imported["files"]] == [str(f) for f in files]
    assert all(len(f["sha256"]) == 64 and f["runs"] == 1 for f in imported["files"])
    assert [r["collective"] for r in imported["runs"]] == ["all_reduce", "alltoall"]
    fp = meta["fingerprint"]
    ident = fp["identity"]
    assert fp["fingerprint"] == identity_hash(ident)
    assert ident["gpu_model"] == "NVIDIA H200" and ident["gpu_count"] == 2 and ident["hostnames"] == ["vm"]
    assert ident["nccl"] == "2.28.9" and ident["collective_lib"] == "nccl" and ident["cluster"] == "vm"
    # The keys gpubench.machine.fingerprint.collect() puts in an identity are all there (None where a log cannot say).
    for k in ("backend", "gpu_model", "gpu_count", "runtime", "runtime_version", "memory_bytes", "cluster",
              "hostname", "cpu_model", "cpu_count", "os", "python", "torch", "nccl", "collective_lib",
              "driver_version"):
        assert k in ident
    assert meta["suites"]["comm"]["cases"] == 28


def test_fingerprints_tell_systems_apart_and_repeat_for_the_same_one(tmp_path):
    def fp(name, tool="nccl-tests", sub="x"):
        _, (d,) = do_import(tmp_path / sub, tool, FIX / name)
        return json.loads((d / "run.json").read_text())["fingerprint"]["fingerprint"]

    h200 = fp("nt-2.19.6-all_reduce-h200x2.txt", sub="a")
    assert h200 == fp("nt-2.19.6-all_reduce-h200x2.txt", sub="b")
    assert h200 != fp("rccl-develop-all_reduce-2x8-M1.txt", "rccl-tests", sub="c")
    assert h200 != fp("mpirun-tag-output-2.16-all_reduce.txt", sub="d")


def test_gpu_count_is_per_node_and_world_size_is_beside_it(tmp_path):
    _, (d,) = do_import(tmp_path, "nccl-tests", FIX / "srun-label-two-runs-2.17.txt")
    ident = json.loads((d / "run.json").read_text())["fingerprint"]["identity"]
    assert (ident["gpu_count"], ident["world_size"], ident["nnodes"]) == (8, 16, 2)
    assert ident["hostnames"] == ["gpu-a-001", "gpu-a-002"] and ident["hostname"] == "gpu-a-001"


def test_json_env_is_scrubbed_before_it_is_stored(tmp_path):
    code, (run_dir,) = do_import(tmp_path, "nccl-tests", FIX / "nt-2.17.6-all_gather-2x8-json-v1.json")
    assert code == 0
    meta = json.loads((run_dir / "run.json").read_text())
    env = meta["imported"]["runs"][0]["config"]["env"]
    assert env == {
        "NCCL_COMM_ID": "10.0.0.11:29500", "NCCL_DEBUG": "WARN", "NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1",
        "NCCL_IB_PKEY": "0", "NCCL_SOCKET_IFNAME": "eth0", "NCCL_TOPO_FILE": "/opt/microsoft/ndv5-topo.xml",
        "RCCL_MSCCL_ENABLE": "0"}
    assert meta["fingerprint"]["volatile"]["env"] == env
    stored = (run_dir / "run.json").read_text() + (run_dir / "comm.parquet").read_bytes().decode("latin-1")
    for secret in ("not-a-real-token", "Zm9vYmFy", "hunter2", "fake-key-for-tests", "/home/alice", "PATH="):
        assert secret not in stored


def test_old_error_column_sets_valid_from_the_tools_bound(tmp_path):
    _, (d,) = do_import(tmp_path, "nccl-tests", FIX / "pre2.13-all_reduce-2x8-error-column.txt")
    df = results.load(d)
    bad = df[df["status"] == "invalid"]
    # One printed error (3e-03, out-of-place at 256 MiB) exceeds 1e-5 × 15: its three rows are invalid.
    assert len(bad) == 3 and set(bad["bytes"]) == {268435456} and set(bad["inplace"]) == {False}
    assert set(bad["check_error"]) == {3e-3} and bad["check_tolerance"].iloc[0] == pytest.approx(1.5e-4)
    assert "above" in bad["message"].iloc[0]
    good = df[df["status"] == "ok"]
    assert good["valid"].eq(True).all() and good["wrong"].isna().all()


def test_validation_off_gives_unknown_validity(tmp_path):
    _, (d,) = do_import(tmp_path, "nccl-tests", FIX / "nt-2.18.2-all_reduce-unalign-c0.txt")
    df = results.load(d)
    assert df["valid"].isna().all() and df["wrong"].isna().all() and (df["status"] == "ok").all()


def test_rccl_asterisk_marks_the_row_invalid(tmp_path, capsys):
    code, (d,) = do_import(tmp_path, "rccl-tests", FIX / "rccl-2023-all_reduce-nthreads-colon.txt")
    out = capsys.readouterr().out
    # the summary says how many results the tool found wrong, and the import fails as a run with a wrong answer does
    assert code == 1 and ", 1 wrong (status invalid)" in out and "1 result(s) the tool found wrong" in out
    df = results.load(d)
    bad = df[df["status"] == "invalid"]
    assert set(bad["bytes"]) == {1 << 25} and set(bad["inplace"]) == {True} and len(bad) == 3
    assert set(df["engine"]) == {"rccl-tests"}


def test_pre_2020_all_gather_busbw_equal_to_algbw_is_noted_not_refused(tmp_path):
    _, (d,) = do_import(tmp_path, "nccl-tests", FIX / "pre2020-all_gather-6wide-type.txt")
    df = results.load(d)
    assert df["message"].str.contains("before 2020-06").all() and (df["status"] == "ok").all()


def test_corrupted_log_exits_2_naming_the_line_and_writes_nothing(tmp_path, capsys):
    code, dirs = do_import(tmp_path, "nccl-tests", FIX / "corrupted-truncated-row.txt")
    err = capsys.readouterr().err.strip()
    assert code == 2 and dirs == []
    assert len(err.splitlines()) == 1
    assert "corrupted-truncated-row.txt:17:" in err and "'268435456      67108864     float     sum      -1   893.20'" in err


def test_a_bad_file_among_good_ones_writes_nothing(tmp_path):
    code, dirs = do_import(tmp_path, "nccl-tests", FIX / "nt-2.19.6-all_reduce-h200x2.txt",
                           FIX / "corrupted-truncated-row.txt")
    assert code == 2 and dirs == []


def test_busbw_that_does_not_follow_from_algbw_is_refused(tmp_path, capsys):
    src = (FIX / "nt-2.19.6-alltoall-h200x2.txt").read_text()
    # alltoall on 2 ranks has busbw = algbw / 2; print the 16 MiB row's busbw as if it were algbw.
    bad = tmp_path / "bad.txt"
    bad.write_text(src.replace("314.33  157.16", "314.33  314.33"))
    code, dirs = do_import(tmp_path, "nccl-tests", bad)
    err = capsys.readouterr().err
    assert code == 2 and dirs == [] and "bad.txt:15:" in err and "busbw 314.33 is not algbw 314.33" in err


def test_unknown_collective_needs_collective_option(tmp_path, capsys):
    # The pre-2020 all_gather table without the echoed command line: all_gather or hypercube?
    log = tmp_path / "ag.txt"
    log.write_text("\n".join((FIX / "pre2020-all_gather-6wide-type.txt").read_text().splitlines()[1:]) + "\n")
    code, _ = do_import(tmp_path, "nccl-tests", log)
    err = capsys.readouterr().err
    assert code == 2 and "pass --collective NAME" in err and "all_gather or hypercube" in err
    code, (d,) = do_import(tmp_path, "nccl-tests", log, extra=("--collective", "all_gather"))
    assert code == 0 and set(results.load(d)["collective"]) == {"all_gather"}


def test_collective_option_is_checked(tmp_path, capsys):
    code, _ = do_import(tmp_path, "nccl-tests", FIX / "nt-2.19.6-all_reduce-h200x2.txt",
                        extra=("--collective", "gather_all"))
    assert code == 2 and "unknown --collective 'gather_all'" in capsys.readouterr().err
    code, _ = do_import(tmp_path, "nccl-tests", FIX / "nt-2.19.6-all_reduce-h200x2.txt",
                        extra=("--collective", "all_gather"))
    assert code == 2 and "the log says this run is all_reduce but --collective says all_gather" in \
        capsys.readouterr().err


def test_the_log_s_content_names_the_tool_whichever_word_was_typed(tmp_path, capsys):
    # the command reads both tools' logs: an rccl-tests log imported as nccl-tests is rccl-tests, said once
    code, (d,) = do_import(tmp_path / "a", "nccl-tests", FIX / "rccl-develop-all_reduce-2x8-M1.txt")
    out, err = capsys.readouterr()
    assert code == 0 and err == "" and "  rccl-tests " in out
    assert set(results.load(d)["engine"]) == {"rccl-tests"}
    # A log that does not say which tool printed it takes the word the user gave.
    code, (d,) = do_import(tmp_path / "b", "rccl-tests", FIX / "pre2.13-all_reduce-2x8-error-column.txt")
    assert code == 1 and capsys.readouterr().err == ""  # 1: the log holds a result its tool found wrong
    assert set(results.load(d)["engine"]) == {"rccl-tests"}


def test_two_runs_in_one_log_are_two_runs(tmp_path):
    _, (d,) = do_import(tmp_path, "nccl-tests", FIX / "srun-label-two-runs-2.17.txt")
    df = results.load(d)
    assert sorted(df.groupby("import_run")["collective"].first()) == ["all_gather", "all_reduce"]
    assert set(df["world_size"]) == {16} and set(df["nnodes"]) == {2}
    runs = json.loads((d / "run.json").read_text())["imported"]["runs"]
    assert [r["avg_busbw"] for r in runs] == [331.207, 326.916]


def test_missing_file_is_a_usage_error(tmp_path, capsys):
    code, _ = do_import(tmp_path, "nccl-tests", tmp_path / "nope.txt")
    assert code == 2 and "cannot read" in capsys.readouterr().err


def test_comm_rows_follow_the_table_contract(tmp_path):
    _, (d,) = do_import(tmp_path, "nccl-tests", FIX / "nt-2.19.6-alltoall-h200x2.txt")
    df = results.load(d)
    assert list(df.columns[:9]) == ["run_id", "suite", "suite_version", "case", *commtable.PARAMS]
    assert set(df["suite"]) == {"comm"} and set(df["op"]) == {"none"} and set(df["dtype"]) == {"float32"}
    for col in commtable.EXTRAS:
        assert col in df.columns
    in_place = df[df["inplace"]]
    # alltoall does not validate in place: N/A there, so validity is unknown rather than true.
    assert in_place["valid"].isna().all() and not math.isnan(df[~df["inplace"]]["wrong"].iloc[0])


def test_footer_count_that_disagrees_with_the_rows_is_reported(tmp_path, capsys):
    log = tmp_path / "f.txt"
    log.write_text((FIX / "pre2.13-all_reduce-2x8-error-column.txt").read_text().replace(
        "Out of bounds values : 16 FAILED", "Out of bounds values : 2 FAILED"))
    code, _ = do_import(tmp_path, "nccl-tests", log)
    err = capsys.readouterr().err
    assert code == 1 and "the footer counts 2 out-of-bounds result(s) and the rows show 1 wrong result(s)" in err
    assert "once per process and thread, so 1 over 16 process(es) would print 16" in err
    # as the tool counts (one per wrong result in each process): nothing to say
    log.write_text((FIX / "pre2.13-all_reduce-2x8-error-column.txt").read_text())
    code, _ = do_import(tmp_path / "b", "nccl-tests", log)
    assert code == 1 and "out-of-bounds" not in capsys.readouterr().err


def _method_of(table_dir):
    df = results.load(table_dir)
    return {col: (sorted(set(df[col].dropna())) if col in df.columns else []) for col in ("graph", "alloc",
                                                                                         "register", "layout")}


def test_rows_say_how_the_tool_measured_where_the_log_tells(tmp_path):
    # nccl-tests built against NCCL >= 2.19 allocates with ncclMemAlloc (gpubench's --alloc nccl), before with
    # cudaMalloc; the header's graph: is the -G flag; the JSON twin's argv tells -R, a text log does not; nThread 1
    # nGpus 2 is one thread driving both GPUs.
    _, (text_dir,) = do_import(tmp_path / "a", "nccl-tests", FIX / "nt-2.19.6-all_reduce-h200x2.txt")
    assert _method_of(text_dir) == {"graph": [False], "alloc": ["nccl"], "register": [],
                                    "layout": ["thread per 2 GPUs"]}
    doc = json.loads((FIX / "nt-2.19.6-all_reduce-h200x2.json").read_text())
    argv = list(doc["args"])
    for flag, expected in ((["-R", "1"], [True]), (["-R0"], [False]), (["--local_register=1"], [True]),
                           ([], [False]), (["-R", "2"], [])):  # -R 2 (symmetric) has no gpubench counterpart
        doc["args"] = argv[:1] + flag + argv[1:]
        doc["config"]["graph"] = 1
        path = tmp_path / f"r{len(flag)}{''.join(flag)}.json"
        path.write_text(json.dumps(doc))
        _, (json_dir,) = do_import(tmp_path / path.stem, "nccl-tests", path)
        # The JSON file names the library, not the headers the binary was built with: alloc is not told.
        assert _method_of(json_dir) == {"graph": [True], "alloc": [], "register": expected,
                                        "layout": ["thread per 2 GPUs"]}, flag
    old = (FIX / "nt-2.19.6-all_reduce-h200x2.txt").read_text().replace("nccl-headers=22809", "nccl-headers=21803")
    (tmp_path / "old.txt").write_text(old)
    _, (old_dir,) = do_import(tmp_path / "c", "nccl-tests", tmp_path / "old.txt")
    assert _method_of(old_dir)["alloc"] == ["cudaMalloc"]
    _, (rccl_dir,) = do_import(tmp_path / "d", "rccl-tests", FIX / "rccl-develop-all_reduce-2x8-M1.txt")
    assert _method_of(rccl_dir)["alloc"] == []
    # One thread per GPU (-t 2 -g 1), and one process per GPU (an MPI build's -t 1 -g 1 over two processes).
    for header, layout in (("nThread 2 nGpus 1", "thread per GPU"), ("nThread 1 nGpus 1", "process per GPU")):
        (tmp_path / "t.txt").write_text((FIX / "nt-2.19.6-all_reduce-h200x2.txt").read_text()
                                        .replace("nThread 1 nGpus 2", header))
        _, (t_dir,) = do_import(tmp_path / layout.replace(" ", "-"), "nccl-tests", tmp_path / "t.txt")
        assert _method_of(t_dir)["layout"] == [layout]
