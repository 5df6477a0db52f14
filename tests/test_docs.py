"""The code in the docs runs as written; the reference pages say what the code does; the README leads to every
page."""

import re
from pathlib import Path

from gpubench.timing import engine
from gpubench.run import runner
from gpubench.backends.cpu import CpuBackend

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_writing_a_suite_example_runs_and_measures():
    text = (DOCS / "writing-a-suite.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    ns: dict = {}
    exec(compile(code, "writing-a-suite.md", "exec"), ns)
    suite = ns["Scale"]()
    be = CpuBackend()
    p = runner.plan([suite], be, quick=True, dtypes=["fp32", "bf16"])
    cfg = engine.EngineConfig(min_samples=3, budget_s=0.05, min_warmup_s=0.0, max_warmup_s=0.05, min_sample_s=1e-4)
    fp32, bf16 = (runner.run_case(suite, c, be, {}, cfg, None) for c in p.cases["scale"])
    assert {r["status"] for r in fp32} == {"ok"} and fp32[0]["value"] > 0
    assert {r["status"] for r in bf16} == {"skipped"} and bf16[0]["message"] == "only fp32 here"
    (best,) = suite.summarize(fp32 + bf16)
    assert best.case.id == f"dtype=best,elements={p.cases['scale'][0]['elements']}" and best.value == fp32[0]["value"]


def test_writing_a_suite_example_registers_runs_and_draws(tmp_path, monkeypatch, capsys):
    """The example, registered as a third-party suite is, through the CLI on the cpu backend: its option, its
    derived row and its chart."""
    from gpubench import declared, registry, results
    from gpubench.cli import main

    code = re.search(r"```python\n(.*?)```", (DOCS / "writing-a-suite.md").read_text(), re.S).group(1)
    ns: dict = {}
    exec(compile(code, "writing-a-suite.md", "exec"), ns)
    monkeypatch.setattr(registry, "plugin_suites", lambda: {"scale": ns["Scale"]})
    monkeypatch.setattr(declared, "suites", lambda: [declared.of(cls) for cls in registry.all_suites().values()])
    assert main(["run", "--suite", "scale", "--backend", "cpu", "--quick", "--scale-factor", "0"]) == 2
    assert "--scale-factor 0 makes every output 0" in capsys.readouterr().err
    assert main(["run", "--suite", "scale", "--backend", "cpu", "--quick", "--scale-factor", "2", "--no-telemetry",
                 "--out", str(tmp_path / "results"), "--cluster", "t"]) == 0
    (run,) = (tmp_path / "results" / "t").iterdir()
    df = results.load(run)
    derived = df[df["stop"] == "derived"]
    assert list(derived["case"].str.startswith("dtype=best")) == [True] and set(derived["status"]) == {"ok"}
    assert main(["report", str(run), "--out", str(tmp_path / "page")]) == 0
    assert (tmp_path / "page" / "scale.png").stat().st_size > 0


def test_what_the_docs_and_messages_tell_people_to_install_is_this_project():
    # `gpubench` on the package index is someone else's project: no line may tell people to pip-install it.
    import gpubench

    root = DOCS.parent
    files = [root / "README.md", *DOCS.glob("*.md"), *(root / "gpubench").rglob("*.py"), *(root / "suites").rglob("*.py")]
    bad = [f"{f.relative_to(root)}: {line.strip()}" for f in files for line in f.read_text().splitlines()
           if re.search(r"pip3? install (-U |--upgrade )?['\"]?gpubench(?![-_\w])", line)]
    assert not bad, bad
    # Nor to upgrade from an index: gpubench-suite is on none (where it is installed, pip says it is satisfied and
    # upgrades nothing); an install is upgraded from its checkout.
    stale = [f"{f.relative_to(root)}: {line.strip()}" for f in files for line in f.read_text().splitlines()
             if re.search(rf"pip3? install (-U|--upgrade) ['\"]?({gpubench.DISTRIBUTION}|{{DISTRIBUTION}})", line)]
    assert not stale, stale
    assert gpubench.DISTRIBUTION in (root / "README.md").read_text()


def test_the_reference_page_and_its_tables_stay_small():
    # docs/measurements.md states current figures (history is in git): a page one reads, not a diary; the tables
    # it cites travel with every clone.
    assert len((DOCS / "measurements.md").read_text().splitlines()) <= 310
    reference = DOCS.parent / "results" / "reference"
    assert sum(f.stat().st_size for f in reference.rglob("*") if f.is_file()) <= 5_000_000


def test_the_cli_reference_is_what_the_parsers_say():
    # docs/cli.md is generated: an option added without regenerating it fails here.
    from gpubench.cli import reference as cli_reference

    assert cli_reference.render() == (DOCS / "cli.md").read_text(), (
        "docs/cli.md is behind the command line: python -m gpubench.cli.reference > docs/cli.md")


def test_the_cli_reference_names_every_command_and_option():
    # Independent of how the page is laid out: every subcommand, every option string and every built-in suite's
    # option, read off the parsers, is on the page as typed.
    import argparse

    from gpubench.cli import reference as cli_reference
    from gpubench.registry import builtin_suites

    page = (DOCS / "cli.md").read_text()
    top = cli_reference.parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    assert len(sub.choices) >= 12
    for name, p in sub.choices.items():
        assert f"## `gpubench {name}`" in page, name
        for a in p._actions:
            for flag in a.option_strings:
                assert flag in ("-h", "--help") or f"`{flag}" in page, (name, flag)
    for cls in builtin_suites().values():
        for option in cls.options:
            assert f"`{option.flag}" in page, (cls.name, option.flag)


def test_every_fake_backend_knob_and_fact_field_is_documented():
    # A fleet test needs these, and they were found only in the source: each variable the code reads, and each
    # health field GPUBENCH_FAKE_FACTS takes, has its line in docs/testing.md.
    from gpubench.check.facts.readers.fake import FAKE_POLL, FAKE_STATIC

    root = DOCS.parent
    sources = [*(root / "gpubench").rglob("*.py"), *(root / "suites").rglob("*.py")]
    knobs = {k for f in sources for k in re.findall(r"GPUBENCH_FAKE_[A-Z_]*[A-Z]", f.read_text())}
    assert {"GPUBENCH_FAKE_DEVICES", "GPUBENCH_FAKE_FACTS"} <= knobs
    page = (DOCS / "testing.md").read_text()
    assert not sorted(k for k in knobs if f"| `{k}` |" not in page), "docs/testing.md lacks these"
    fields = {*FAKE_STATIC, *FAKE_POLL, "nvlink_down"}
    assert not sorted(f for f in fields if f"`{f}`" not in page), "docs/testing.md lacks these facts"


def test_the_readme_links_every_doc():
    # Its "Docs:" line named 4 of 10 pages: each page of docs/ is reached from the README.
    readme = (DOCS.parent / "README.md").read_text()
    docs_line = readme[readme.rindex("\nDocs: "):]
    assert not sorted(p.name for p in DOCS.glob("*.md") if f"](docs/{p.name})" not in docs_line)
