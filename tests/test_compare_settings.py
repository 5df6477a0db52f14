"""compare shows the software and NCCL/RCCL settings that differ between the sides, and never refuses over them."""

import json
from types import SimpleNamespace

from test_compare_helpers import base_run, cli, copy_run

from gpubench.compare import settings


def _meta(gpubench="0.1.0", env=None, imported=False, **identity):
    volatile = {"env": {} if env is None else env, **({"imported": True} if imported else {})}
    return {"gpubench_version": gpubench, "fingerprint": {"identity": identity, "volatile": volatile}}


def _side(*metas):
    return SimpleNamespace(runs=list(metas))


def test_software_and_env_differences_read_baseline_to_current():
    base = settings.of_side(_side(_meta(nccl="2.27.3", torch="2.10.0", env={"NCCL_ALGO": "Ring"})))
    cur = settings.of_side(_side(_meta(nccl="2.28.9", torch="2.10.0", env={"NCCL_P2P_DIRECT_DISABLE": "1"})))
    assert settings.differences(base, cur) == [
        "nccl: 2.27.3 → 2.28.9", "NCCL_ALGO: Ring → unset", "NCCL_P2P_DIRECT_DISABLE: unset → 1"]
    assert settings.differences(base, base) == []
    # Where gpubench found the nccl-tests binaries is no setting of NCCL (older runs recorded it).
    found = settings.of_side(_side(_meta(nccl="2.27.3", torch="2.10.0",
                                         env={"NCCL_ALGO": "Ring", "NCCL_TESTS_DIR": "/opt/nccl-tests/build"})))
    assert settings.differences(base, found) == []


def test_a_fact_one_side_does_not_know_is_no_difference():
    measured = settings.of_side(_side(_meta(torch="2.11.0", nccl="2.28.9", env={})))
    # A text log of nccl-tests: no torch, no environment (its empty env is unknown, not "nothing set").
    imported = settings.of_side(_side(_meta(gpubench="0.1.0", nccl="2.28.9", imported=True)))
    assert imported.env is None and "torch" not in imported.software
    assert settings.differences(measured, imported) == []
    by_tool = settings.of_side(_side(_meta(nccl="2.28.9", imported=True, tool="nccl-tests", tool_version="2.19.6")))
    assert settings.differences(measured, by_tool) == ["tool: gpubench → nccl-tests"]
    # Started by gpubench's nccl-tests engine, the import records the settings the binaries ran with.
    engine = settings.of_side(_side(_meta(nccl="2.28.9", imported=True, tool="nccl-tests",
                                          env={"NCCL_P2P_DIRECT_DISABLE": "1"})))
    assert settings.differences(measured, engine) == ["tool: gpubench → nccl-tests",
                                                      "NCCL_P2P_DIRECT_DISABLE: unset → 1"]
    # A bare table has no run.json: nothing known, nothing shown.
    assert settings.differences(settings.of_side(_side()), measured) == []


def test_a_pooled_window_that_disagrees_is_mixed():
    window = settings.of_side(_side(_meta(nccl="2.27.3", env={"NCCL_PROTO": "Simple"}), _meta(nccl="2.28.9", env={})))
    assert window.software["nccl"] == "mixed (2.27.3, 2.28.9)"
    assert window.env == {"NCCL_PROTO": "mixed (Simple, unset)"}
    one = settings.of_side(_side(_meta(nccl="2.28.9", env={})))
    assert settings.differences(window, one) == ["nccl: mixed (2.27.3, 2.28.9) → 2.28.9",
                                                 "NCCL_PROTO: mixed (Simple, unset) → unset"]


def test_how_the_comm_rows_were_measured_is_a_difference():
    import pandas as pd

    def side(**cols):
        return SimpleNamespace(runs=[_meta(nccl="2.28.9", env={})], raw=pd.DataFrame(cols))

    plain = settings.of_side(side(graph=[False, False], alloc=["torch", "torch"], register=[False, False]))
    registered = settings.of_side(side(graph=[False, False], alloc=["nccl", "nccl"], register=[True, True]))
    assert settings.differences(plain, registered) == ["alloc: torch → nccl", "register: False → True"]
    # Rows without a column (runs from before --alloc, an import) do not know it: no difference is shown; nor
    # do the rows of a case skipped before it was prepared, beside rows that know.
    older = settings.of_side(side(graph=[False, False]))
    assert settings.differences(older, registered) == []
    part = settings.of_side(side(graph=[True, True], alloc=["nccl", None], register=[True, None]))
    assert settings.differences(part, plain) == ["graph: True → False", "alloc: nccl → torch",
                                                 "register: True → False"]
    window = settings.of_side(side(graph=[False, True], alloc=["torch", "torch"], register=[False, False]))
    assert settings.differences(window, plain) == ["graph: mixed (False, True) → False"]


def test_how_the_ranks_were_laid_out_is_a_difference_where_it_is_not_the_case_itself():
    import pandas as pd

    def side(case, layout):
        return SimpleNamespace(runs=[_meta(nccl="2.28.9", env={})], raw=pd.DataFrame({"case": case, "layout": layout}))

    comm = ["collective=all_reduce,bytes=1048576", "collective=all_reduce,bytes=4194304"]
    torch_engine = settings.of_side(side(comm, ["process per GPU"] * 2))
    one_thread = settings.of_side(side(comm, ["thread per 4 GPUs"] * 2))
    assert settings.differences(torch_engine, one_thread) == ["layout: process per GPU → thread per 4 GPUs"]
    # gemm's layout is a case parameter (in its case id): other grids on the two sides are not another method.
    gemm = settings.of_side(side(["shape=square,dtype=bf16,layout=NT", "shape=square,dtype=bf16,layout=NN"],
                                 ["NT", "NN"]))
    gemm_nt = settings.of_side(side(["layout=NT,shape=square,dtype=bf16"], ["NT"]))
    assert settings.differences(gemm, gemm_nt) == [] and "layout" not in gemm.method
    both = settings.of_side(side([comm[0], "shape=square,dtype=bf16,layout=NT"], ["process per GPU", "NT"]))
    assert both.method["layout"] == "process per GPU"


def _changed(info):
    info["gpubench_version"] = "0.2.0"
    info["fingerprint"]["identity"]["nccl"] = "2.28.9"
    info["fingerprint"]["volatile"]["env"] = {**info["fingerprint"]["volatile"].get("env", {}),
                                              "NCCL_P2P_DIRECT_DISABLE": "1"}


def test_compare_shows_them_in_every_format_and_still_compares(capsys, tmp_path_factory, tmp_path):
    base = base_run(tmp_path_factory)
    a = copy_run(base, tmp_path, "20990101T000000Z-0000a1",
                 meta=lambda info: info["fingerprint"]["identity"].update(nccl="2.27.3"))
    b = copy_run(base, tmp_path, "20990101T000000Z-0000b1", meta=_changed)
    expected = ["gpubench: 0.1.0 → 0.2.0", "nccl: 2.27.3 → 2.28.9", "NCCL_P2P_DIRECT_DISABLE: unset → 1"]

    code, out, err = cli(capsys, "compare", a, b, "--format", "json")
    assert code == 0, err  # same samples: nothing WORSE, and no refusal over software or settings
    assert json.loads(out)["setting_differences"] == expected

    code, out, _ = cli(capsys, "compare", a, b, "--format", "markdown")
    assert "- settings differ: " + "; ".join(expected) in out

    code, out, _ = cli(capsys, "compare", a, b, "--format", "junit")
    assert 'name="setting_differences"' in out and "NCCL_P2P_DIRECT_DISABLE: unset → 1" in out

    code, out, _ = cli(capsys, "compare", a, b)
    flat = " ".join(out.split())
    assert "settings differ: gpubench: 0.1.0 → 0.2.0" in flat and "NCCL_P2P_DIRECT_DISABLE: unset → 1" in flat

    code, out, _ = cli(capsys, "compare", a, a, "--format", "json")
    assert json.loads(out)["setting_differences"] == []


def test_where_the_host_set_figures_were_measured_is_a_setting():
    def pinned(mode, cpus):
        return {**_meta(), "processes": {"pinning": {"mode": mode, "cpus": cpus, "numa_node": 1, "note": ""}}}

    off, core = settings.of_side(_side(pinned("off", []))), settings.of_side(_side(pinned("core", [17])))
    assert settings.differences(off, core) == ["pinning: off → core (CPU 17)"]
    node = settings.of_side(_side(pinned("node", [16, 17, 18, 19])))
    assert settings.differences(core, node) == ["pinning: core (CPU 17) → node (CPUs 16-19)"]
    assert settings.pinning_text({"mode": "node", "cpus": [0, 2]}) == "node (CPUs 0,2)"
    # an older run does not say: no difference is shown
    assert settings.differences(settings.of_side(_side(_meta())), core) == []
