"""`gpubench report`: the page and its PNGs from CPU runs of every suite and imported nccl-tests logs; overlays
and the compare table for several runs; a note instead of an empty chart; exit 2 for a path that is no run."""

import contextlib
import html
import io
import json
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from gpubench.timing import engine
from gpubench import results
from gpubench.cli import main
from gpubench.report.plotting import spread

FIX = Path(__file__).parent / "fixtures" / "nccl-tests"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# Tiny engine budgets: these runs feed charts, their figures do not matter.
TINY = engine.EngineConfig(min_samples=3, budget_s=0.01, min_warmup_s=0.0, max_warmup_s=0.01, min_sample_s=1e-9)
RUNS = {
    "elementwise": ["run", "--suite", "elementwise", "--backend", "cpu", "--quick", "--dtype", "fp32",
                    "--sizes", "4M", "--filter", "op=(copy|triad)"],
    "fake": ["run", "--suite", "gemm,copy,launch", "--backend", "fake", "--quick", "--dtype", "fp32"],
    "comm": ["run", "--suite", "comm", "--backend", "cpu", "--quick", "--collectives", "all_reduce",
             "--min-bytes", "1K", "--max-bytes", "4K", "--step-factor", "4"],
    # The cpu backend has no device memory: every copy case is skipped, so the copy chart must become a note.
    "skipped": ["run", "--suite", "copy", "--backend", "cpu", "--quick", "--filter", "direction=h2d,memory=pinned"],
    "imported": ["import", "nccl-tests", str(FIX / "nt-2.19.6-all_reduce-h200x2.txt")],
}


def quiet(*argv) -> tuple[int, str]:
    with contextlib.redirect_stdout(io.StringIO()) as log, contextlib.redirect_stderr(log):
        code = main([str(a) for a in argv])
    return code, log.getvalue()


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("report-runs")
    made = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine, "QUICK", TINY)
        for name, argv in RUNS.items():
            cluster = f"c-{name}"
            code, log = quiet(*argv, "--out", out, "--cluster", cluster)
            assert code == 0, log[-2000:]
            (made[name],) = (out / cluster).iterdir()
    return made


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.files, self.text, self.rows = set(), [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            assert a["src"].startswith("data:image/png;base64,")  # the page needs nothing beside it
            self.files.add(a["data-file"])
        if tag == "a" and a.get("href", "").endswith(".png"):
            self.files.add(a["href"])
        if tag == "tr" and a.get("class"):
            self.rows.append(a["class"])

    def handle_data(self, data):
        self.text.append(data)


def parse(path: Path) -> Page:
    p = Page()
    p.feed(path.read_text(encoding="utf-8"))
    p.close()
    return p


def pngs(out: Path) -> set[str]:
    names = {p.name for p in out.glob("*.png")}
    for n in names:
        assert (out / n).read_bytes()[:8] == PNG_MAGIC, n
    return names


@pytest.fixture(scope="module")
def full(runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "all"
    code, log = quiet("report", *runs.values(), "--out", out)
    assert code == 0, log[-2000:]
    return out, log


def test_every_suite_has_its_chart_and_the_page_references_them(full):
    out, log = full
    written = pngs(out)
    expected = {"elementwise.png", "gemm.png", "launch.png", "copy.png", "comm.png"}
    assert expected <= written, written
    assert any(re.fullmatch(r"roofline-\d+\.png", n) for n in written)
    page = parse(out / "index.html")
    assert page.files == written  # every chart written is on the page, and nothing else is
    assert "report:" in log


def test_header_names_systems_and_device_state(full, runs):
    text = " ".join(parse(full[0] / "index.html").text)
    for label in ("c-elementwise", "c-fake", "c-comm", "c-imported"):
        assert label in text
    assert "systems and device state" in text
    assert "throttle" in text


def test_empty_suite_gets_a_note_not_a_chart(tmp_path, runs):
    code, log = quiet("report", runs["skipped"], "--out", tmp_path / "r")
    assert code == 0, log
    assert pngs(tmp_path / "r") == set()
    text = " ".join(parse(tmp_path / "r" / "index.html").text)
    assert "No chart:" in text and "copy" in text


def test_several_runs_overlay_and_carry_the_compare_table(tmp_path, runs):
    # The same run twice: one legend entry each, and a compare table of SAME verdicts.
    out = tmp_path / "r"
    code, log = quiet("report", runs["elementwise"], runs["elementwise"], runs["comm"], runs["imported"],
                      "--out", out)
    assert code == 0, log
    page = parse(out / "index.html")
    text = " ".join(page.text)
    assert "compare" in text and "(baseline)" in text
    assert "SAME" in page.rows or "BETTER" in page.rows or "WORSE" in page.rows
    assert re.search(r"c-elementwise run \w+ #2", text)
    assert page.files == pngs(out)


def test_the_compare_table_says_which_settings_differ(tmp_path, runs):
    other = tmp_path / "other" / runs["elementwise"].name
    shutil.copytree(runs["elementwise"], other)
    meta = json.loads((other / "run.json").read_text())
    meta["fingerprint"]["volatile"]["env"] = {**meta["fingerprint"]["volatile"]["env"], "NCCL_ALGO": "Ring"}
    (other / "run.json").write_text(json.dumps(meta))
    code, log = quiet("report", runs["elementwise"], other, "--out", tmp_path / "r")
    assert code == 0, log
    text = " ".join(parse(tmp_path / "r" / "index.html").text)
    assert "settings differ: NCCL_ALGO: unset → Ring" in text


def test_runs_of_two_systems_get_a_cross_cluster_table(tmp_path, runs):
    # The systems come from the run.json the report read: another CPU model (the cpu backend's device) makes the
    # table cross-cluster (ratios and % of spec peak), not a note that the runs cannot be compared.
    other = tmp_path / "other" / runs["elementwise"].name
    shutil.copytree(runs["elementwise"], other)
    meta = json.loads((other / "run.json").read_text())
    meta["fingerprint"]["identity"]["cpu_model"] = "Another CPU"
    (other / "run.json").write_text(json.dumps(meta))
    code, log = quiet("report", runs["elementwise"], other, "--out", tmp_path / "r")
    assert code == 0, log
    text = " ".join(parse(tmp_path / "r" / "index.html").text)
    assert "cross-cluster: cpu_model:" in text and "Another CPU" in text, text[-2000:]


@pytest.mark.parametrize("bad", ["missing", "no-runs"])
def test_bad_input_exits_2_with_one_line(tmp_path, runs, capsys, bad):
    # (a directory of runs is no longer bad input: it draws their history, tests/test_history.py)
    path = tmp_path / "nope"
    if bad == "no-runs":
        (path / "not-a-run").mkdir(parents=True)
    code = main(["report", str(path), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpubench: error: ") and "run.json" in lines[0], err


def test_out_must_be_a_folder(tmp_path, runs, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["report", str(runs["elementwise"]), "--out", str(blocker)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_spread_is_the_interquartile_range_and_none_for_one_sample():
    import pandas as pd

    rows = pd.DataFrame({"value": [3.0, 5.0], "samples": [[1.0, 2.0, 3.0, 4.0, 5.0], [5.0]]})
    err = spread(rows)
    assert err.shape == (2, 2)
    assert list(err[:, 0]) == [1.0, 1.0]  # quartiles 2 and 4 around the median 3
    assert list(err[:, 1]) == [0.0, 0.0]


def test_autotune_winners_chart_from_a_sweep_table(tmp_path, runs):
    # An autotune table is comm's rows under a config column; make one from the comm run: a faster config.
    import shutil

    import pandas as pd

    from gpubench import results

    run = tmp_path / "c-tune" / "20261121T000000Z-abcdef"
    run.mkdir(parents=True)
    shutil.copy(runs["comm"] / "run.json", run / "run.json")
    comm = results.load(runs["comm"])
    comm = comm[comm["suite"] == "comm"].assign(suite="autotune", config="default")
    fast = comm.assign(config="NCCL_ALGO=Ring", value=comm["value"] * 1.5,
                       samples=[[x * 1.5 for x in s] for s in comm["samples"]])
    results.save(pd.concat([comm, fast], ignore_index=True), run / "autotune.parquet", suite="autotune")
    code, log = quiet("report", run, "--out", tmp_path / "r")
    assert code == 0, log
    assert "autotune.png" in pngs(tmp_path / "r")
    assert "autotune.png" in parse(tmp_path / "r" / "index.html").files


def test_kernel_sweep_chart_ranks_launch_shapes_against_torch(tmp_path, runs):
    import shutil

    from gpubench import results

    run = tmp_path / "c-kern" / "20261123T000000Z-abcdef"
    run.mkdir(parents=True)
    shutil.copy(runs["comm"] / "run.json", run / "run.json")
    rows = []
    for kernel, metric, unit, base in (("gemm", "throughput", "TFLOP/s", 500.0), ("triad", "bandwidth", "GB/s", 3000.0)):
        for j, cfg in enumerate(("torch", "w4_v16", "w16_v8", "w1_v4")):
            v = base * (1.0, 0.99, 1.01, 0.3)[j]
            rows.append({"suite": "autotune-kernels", "case": f"kernel={kernel},config={cfg}", "kernel": kernel,
                         "dtype": "fp32", "shape": "4096", "config": cfg, "metric": metric, "unit": unit,
                         "better": "higher", "value": v, "samples": [v, v], "status": "ok", "stop": "cv", "n": 2})
    results.save(results.frame(rows, ("kernel", "dtype", "shape", "config")), run / "autotune-kernels.parquet")
    code, log = quiet("report", run, "--out", tmp_path / "r")
    assert code == 0, log
    assert "autotune-kernels.png" in pngs(tmp_path / "r")
    assert "autotune-kernels.png" in parse(tmp_path / "r" / "index.html").files
    from gpubench.report.runs import load_runs
    from gpubench.suites.autotune_kernels import AutotuneKernels

    (chart,) = AutotuneKernels.charts(load_runs([run]), tmp_path / "again")  # the suite's own chart hook
    assert chart.file == "autotune-kernels.png"


def test_a_run_that_shared_its_gpu_or_ran_on_a_busy_host_is_said_at_the_top(tmp_path, runs):
    import json
    import shutil

    run = tmp_path / "c" / "shared-run"
    shutil.copytree(runs["elementwise"], run)
    meta = json.loads((run / "run.json").read_text())
    first = str(results.load(run)["case"].iloc[0])  # a case the run measured: only those are counted
    meta["contention"] = {"contended": "pid 607 (python3)", "cases": {"elementwise": [first]},
                          "host": {"loaded": True, "others_share": 0.75, "cpus": 2, "heaviest": None}}
    (run / "run.json").write_text(json.dumps(meta))
    code, log = quiet("report", run, "--out", tmp_path / "r")
    assert code == 0, log
    html = (tmp_path / "r" / "index.html").read_text()
    top = html[html.index("<h1>"):html.index("systems and device state")]
    assert "GPU shared during this run: pid 607 (python3) (1 of" in top
    assert "host busy during this run: other processes used 75% of 2 CPUs" in top
    # a run alone on its machine has no such line (this copy says so: the real run's host may have been busy)
    alone = tmp_path / "c" / "alone-run"
    shutil.copytree(runs["elementwise"], alone)
    meta["contention"] = {"contended": "", "cases": {}, "host": {"loaded": False, "others_share": 0.1, "cpus": 2,
                                                                 "loaded_cases": {}}}
    (alone / "run.json").write_text(json.dumps(meta))
    code, log = quiet("report", alone, "--out", tmp_path / "quiet")
    assert 'class="warn"><li>' not in (tmp_path / "quiet" / "index.html").read_text()


H100_RUN = Path(__file__).resolve().parent.parent / "results" / "reference" / "h100" / "gate-memory-20261125" / \
    "runs" / "20261125T184855Z-57eba7"  # the quick set on one H100, 2026-11-25 (docs/measurements.md)
_BROWSER_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1400,1800")


def _chromium():
    import shutil

    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None:
        if os.environ.get("GPUBENCH_REQUIRE_BROWSER"):  # CI installs it: a missing browser is a failure there
            pytest.fail("GPUBENCH_REQUIRE_BROWSER is set and no chromium is installed")
        pytest.skip("no chromium here (.ci/run installs Debian's)")
    return found


@pytest.fixture(scope="module")
def browsed(runs, tmp_path_factory):
    """Reports of a CPU run, of an H100 run and of an imported H200 nccl-tests sweep beside the other runs, with
    every figure's tick labels checked as it is saved."""
    import matplotlib.figure

    from gpubench.report.chartfit import overlaps

    crowded = []
    save = matplotlib.figure.Figure.savefig

    def checked(fig, *a, **kw):
        out = save(fig, *a, **kw)
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            for axis in (ax.xaxis, ax.yaxis):
                shown = [t for minor in (False, True) for t in axis.get_ticklabels(minor=minor)]
                if overlaps(shown, renderer):
                    crowded.append((str(a[0]), ax.get_title(), [t.get_text() for t in shown if t.get_visible()]))
        return out

    out = tmp_path_factory.mktemp("browsed")
    sweep = _wide_sweep(runs["imported"], out / "sweep")
    slower = _scaled(runs["elementwise"], out / "slower", 3.723)  # a compare table of +272.3 % rows
    # where a clone lives is the user's: a path without a space or hyphen wider than a narrow window (CI's once
    # overflowed the page in the list of what was not compared)
    far = Path(shutil.copytree(H100_RUN, out / "ci_workspace" / "checkout_of_the_repository" / "results" / "reference"
                               / H100_RUN.name))
    pages = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(matplotlib.figure.Figure, "savefig", checked)
        for name, paths in (("cpu", [runs["elementwise"]]), ("h100", [H100_RUN]),
                            ("many", [H100_RUN, runs["imported"], sweep, runs["comm"], runs["fake"]]),
                            ("pair", [runs["elementwise"], slower, far])):
            code, log = quiet("report", *paths, "--out", out / name)
            assert code == 0, log[-2000:]
            pages[name] = out / name / "index.html"
    return pages, crowded


def _wide_sweep(imported: Path, dest: Path) -> Path:
    """The imported H200 all_reduce's 1 MiB rows at every size nccl-tests' default sweep prints (-b 8 -e 16G -f 2:
    32 sizes), as a run of their own: a bus-bandwidth chart with that many sizes on its x axis."""
    df = results.load(imported)
    one = df[df["bytes"] == (1 << 20)]
    rows = []
    for k in range(3, 35):
        part = one.copy()
        part["case"] = part["case"].str.replace("bytes=1048576", f"bytes={1 << k}", regex=False)
        part["bytes"] = 1 << k
        rows.append(part)
    shutil.copytree(imported, dest)
    results.save(pd.concat(rows, ignore_index=True), dest / "comm.parquet")
    return dest


def _scaled(run: Path, dest: Path, factor: float, cv: dict[str, float] | None = None) -> Path:
    """A copy of ``run`` whose figures are ``factor`` × its own (samples and statistics alike); ``cv``: case id →
    the spread that case's rows are given."""
    shutil.copytree(run, dest)
    for table in dest.glob("*.parquet"):
        df = results.load_table(table)
        df["samples"] = [[x * factor for x in s] for s in df["samples"]]
        for col in ("value", "mean", "min", "max", "stdev", "iqr"):
            df[col] = df[col] * factor
        for case, spread_ in (cv or {}).items():
            df.loc[df["case"] == case, "cv"] = spread_
        results.save(df, table)
    return dest


def test_no_tick_labels_overlap_in_any_chart(browsed):
    _, crowded = browsed
    assert not crowded, crowded


def test_no_roofline_point_sits_above_the_roof_drawn(runs):
    from gpubench.report import roofline

    for path in (runs["elementwise"], H100_RUN, runs["fake"]):
        _, roofs = roofline.analyze(results.load(path))
        assert roofs, path
        for ro in roofs:
            for p in ro.points:
                assert p.tflops <= ro.measured_roof(p) * (1 + 1e-9), (path, ro.dtype, p)


# Laid out, the page tells its width and the words of its table cells that were split over two lines: a word is
# what lies between spaces, or after a comma (a case wraps between its parameters) or a hyphen; code (paths,
# command lines) may wrap anywhere.
_MEASURE = """<script>
var broken = [];
document.querySelectorAll("td, th").forEach(function (cell) {
  var walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT), node;
  while ((node = walk.nextNode())) {
    if (node.parentElement.closest("code")) continue;
    var word = /[^\\s,-]+[,-]?/g, m;
    while ((m = word.exec(node.textContent))) {
      var range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      var lines = new Set(Array.from(range.getClientRects()).filter(function (r) { return r.width > 0; })
                          .map(function (r) { return Math.round(r.top); }));
      if (lines.size > 1) broken.push(m[0]);
    }
  }
});
document.body.setAttribute("data-broken", JSON.stringify(broken));
document.body.setAttribute("data-width", document.documentElement.scrollWidth);
</script>"""


def _saved(monkeypatch) -> list:
    """(file name, figure) of every chart saved from now on: a figure's artists stay readable once it is closed."""
    import matplotlib.figure

    saved, save = [], matplotlib.figure.Figure.savefig

    def keep(fig, *a, **kw):
        saved.append((Path(str(a[0])).name, fig))
        return save(fig, *a, **kw)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    return saved


def test_a_panel_draws_only_roofs_of_its_own_dtype_from_steady_figures(tmp_path, monkeypatch):
    # The H100 quick night with its bf16 dot made three times as fast and noisy (±24 %): the fp32 panels take their
    # measured memory roof from their own dtype's steady figures (issue 50, item 2); the bf16 ones draw none, neither
    # at the noisy dot nor at the steady ops it reads above (issue 73, item 6).
    from gpubench.report import roofline

    run = _scaled(H100_RUN, tmp_path / "run", 1.0)
    table = run / "elementwise.parquet"
    df = results.load_table(table)
    truth = roofline.memory_roofs(df)
    dot = df["case"] == "op=dot,dtype=bf16,array_bytes=268435456,impl=torch"
    for col in ("value", "mean", "min", "max"):
        df.loc[dot, col] = df.loc[dot, col] * 3
    df.loc[dot, "cv"] = 0.24
    results.save(df, table)
    assert set(truth) == {"bf16", "fp32"} and roofline.memory_roofs(results.load(run)) == {"fp32": truth["fp32"]}
    saved = _saved(monkeypatch)
    code, log = quiet("report", run, "--out", tmp_path / "page")
    assert code == 0, log
    charts = dict(saved)
    for chart in ("elementwise.png", "roofline-1.png"):
        drawn = {ax.get_title().split(",")[0]: ax for ax in charts[chart].axes if ax.get_title()}
        roofs = {dtype: [ln for ln in drawn[dtype].get_lines() if ln.get_label().startswith("measured")]
                 for dtype in ("bf16", "fp32")}
        assert roofs["fp32"], chart
        if chart == "elementwise.png":  # a level: the best bandwidth
            assert [max(ln.get_ydata()) for ln in roofs["fp32"]] == [pytest.approx(truth["fp32"])]
            assert roofs["bf16"] == []
        else:  # the diagonal's slope: TF/s at an intensity, over it, in GB/s; bf16 keeps only its flat fma roof
            slope = max(ln.get_ydata()[0] / ln.get_xdata()[0] * 1e3 for ln in roofs["fp32"])
            assert slope == pytest.approx(truth["fp32"], rel=1e-6)
            assert all(len(set(ln.get_ydata())) == 1 for ln in roofs["bf16"]), [ln.get_label() for ln in roofs["bf16"]]


def test_a_cpu_roofline_ends_past_its_points_and_its_header_is_a_cpus(tmp_path, runs, monkeypatch):
    # A CPU has no compute roof: its memory roof once climbed to 30 TF/s across the chart, and its header was a
    # GPU's dashes (issue 50, item 2). The run's figures made steady, so that a roof is drawn at all.
    steady = {case: 0.001 for case in results.load(runs["elementwise"])["case"].unique()}
    run = _scaled(runs["elementwise"], tmp_path / "run", 1.0, steady)
    saved = _saved(monkeypatch)
    code, log = quiet("report", run, "--out", tmp_path / "page")
    assert code == 0, log
    (fig,) = [f for name, f in saved if name.startswith("roofline")]
    (ax,) = [a for a in fig.axes if a.get_title()]
    points = [x for c in ax.collections for x, _ in c.get_offsets()]
    lines = [ln for ln in ax.get_lines() if "measured" in ln.get_label()]
    assert lines and points
    assert max(max(ln.get_xdata()) for ln in lines) <= 2 * max(points) * (1 + 1e-9)
    text = " ".join(parse(tmp_path / "page" / "index.html").text)
    assert "load average" in text and "none read on a CPU" in text and "— / — MHz" not in text


def test_the_pages_fit_1400_pixels_in_a_real_browser(browsed, tmp_path):
    import subprocess

    pages, _ = browsed
    browser = _chromium()
    for name, page in pages.items():
        probe = page.with_name("probe.html")  # the page, telling its own laid-out width
        probe.write_text(page.read_text(encoding="utf-8").replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
        argv = [browser, *_BROWSER_FLAGS, f"--user-data-dir={tmp_path / name}"]
        dom = subprocess.run([*argv, "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120).stdout
        width = re.search(r'data-width="(\d+)"', dom)
        assert width and int(width.group(1)) <= 1400, (name, width and width.group(1))
        # A table's cells wrap between words, never inside one (UNKNOW|N, +272.3|% at 1400 px: issue 50, item 1).
        broken = re.search(r'data-broken="([^"]*)"', dom)
        assert broken and json.loads(html.unescape(broken.group(1))) == [], (name, broken and broken.group(1))
        shot = tmp_path / f"{name}.png"
        subprocess.run([*argv, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120)
        assert shot.read_bytes()[:8] == PNG_MAGIC  # what a reader sees, for the record


# The page laid out in a frame of a given width (a browser window is at least 500 px wide), all details opened:
# whether it runs off that width, the words of its command lines, paths and times split over two lines (a word is
# what lies between spaces, a path's part with its slash), the system table's right edge, the tables that scroll.
_FRAMED = """<!DOCTYPE html><html><body style="margin:0"><iframe id="f" src="%s" width="%d" height="900"
style="border:0"></iframe><script>
document.getElementById("f").addEventListener("load", function () {
  var doc = this.contentDocument, win = this.contentWindow, split = [];
  doc.querySelectorAll("details").forEach(function (d) { d.open = true; });
  doc.querySelectorAll("code, .small").forEach(function (el) {
    var walk = doc.createTreeWalker(el, win.NodeFilter.SHOW_TEXT), node;
    while ((node = walk.nextNode())) {
      var word = /[^\\s\\/]+\\/?/g, m;
      while ((m = word.exec(node.textContent))) {
        var range = doc.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        var lines = new Set(Array.from(range.getClientRects()).filter(function (r) { return r.width > 0; })
                            .map(function (r) { return Math.round(r.top); }));
        if (lines.size > 1) split.push(m[0]);
      }
    }
  });
  var system = doc.querySelector("table").getBoundingClientRect();  // the first: systems and device state
  var scrolling = Array.prototype.filter.call(doc.querySelectorAll(".scroll"), function (b) {
    return b.scrollWidth > b.clientWidth; }).length;
  document.body.setAttribute("data-laid", JSON.stringify({
    width: doc.documentElement.scrollWidth, room: doc.documentElement.clientWidth, split: split,
    system: system.right, scrolling: scrolling}));
});
</script></body></html>"""


def _laid_out(page: Path, width: int, tmp: Path) -> dict:
    import subprocess

    frame = page.with_name(f"framed-{width}.html")
    frame.write_text(_FRAMED % (page.name, width), encoding="utf-8")
    argv = [_chromium(), *_BROWSER_FLAGS, "--hide-scrollbars", "--allow-file-access-from-files",
            f"--user-data-dir={tmp / f'chromium-{width}'}", "--dump-dom", frame.as_uri()]
    dom = subprocess.run(argv, capture_output=True, text=True, timeout=120).stdout
    found = re.search(r'data-laid="([^"]*)"', dom)
    assert found, dom[-2000:]
    return json.loads(html.unescape(found.group(1)))


def test_command_lines_and_times_keep_their_words_and_a_narrow_window_keeps_the_page(browsed, tmp_path):
    # `--backend` once wrapped as `-`/`-backend` and a start time as `2026-12-`/`07T…`; at 420 px the system table
    # ran off the page. Narrow, each run's cells stack under their headers; the compare tables scroll in their box.
    pages, _ = browsed
    for name in ("many", "pair"):
        for width in (1400, 420):
            laid = _laid_out(pages[name], width, tmp_path / name)
            assert laid["width"] <= laid["room"] == width, (name, width, laid)
            assert laid["system"] <= width and laid["split"] == [], (name, width, laid)
            if width == 1400:
                assert laid["scrolling"] == 0, (name, laid)  # wide, every table fits the page as it is


def test_a_results_root_or_a_directory_of_runs_is_answered_with_the_layout(runs, tmp_path, capsys):
    root = runs["elementwise"].parent.parent  # <out>/<cluster>/<run_id>: what gpubench run --out <out> writes
    directory = runs["elementwise"].parent
    empty = tmp_path / "results"
    empty.mkdir()
    for paths, said in (([root], f"{root / 'c-comm'}/<run_id>"),
                        ([directory, runs["comm"]], f"{directory}/<run_id>, or {directory} alone for its nightly"),
                        ([empty], f"{empty}/<cluster>/<run_id>")):
        assert main(["report", *map(str, paths), "--out", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and said in err, err
    assert not (tmp_path / "r").exists()


def test_crowded_tick_labels_are_thinned_until_none_overlap():
    from matplotlib.ticker import FixedLocator, FuncFormatter

    from gpubench.report.chartfit import overlaps, thin_ticks
    from gpubench.report.plotting import fmt_bytes, pyplot

    fig, ax = pyplot().subplots(figsize=(3.0, 2.0))
    sizes = [1 << k for k in range(3, 35)]  # nccl-tests' default sweep, every size labelled, a narrow panel
    ax.plot(sizes, range(len(sizes)))
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sizes))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: fmt_bytes(x)))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert overlaps(ax.xaxis.get_ticklabels(), renderer)  # as drawn: 32M128M512M2G
    thin_ticks(fig)
    fig.savefig(io.BytesIO(), format="png")  # what is written keeps the thinning
    shown = [t for t in ax.xaxis.get_ticklabels() if t.get_visible()]
    assert not overlaps(shown, fig.canvas.get_renderer()) and shown[0].get_text() == "8B" and len(shown) > 2
