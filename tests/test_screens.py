"""Every line people read speaks one vocabulary: the progress, summary tables, compare views, report page and import
lines of the CPU quick runs and of the nccl-tests fixtures show byte counts in binary units (never a raw count in
a case id), numbers without exponents, one dtype vocabulary (fp32, bf16, ...) and µs."""

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIX = Path(__file__).parent / "fixtures" / "nccl-tests"


def gpubench(*argv, ok=(0,)) -> str:
    proc = subprocess.run([sys.executable, "-m", "gpubench", *map(str, argv)], capture_output=True, text=True,
                          timeout=600, env={"PATH": "/usr/bin:/bin", "COLUMNS": "160", "HOME": str(Path.home())})
    assert proc.returncode in ok, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout + proc.stderr


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts = []

    def handle_data(self, data):
        self.parts.append(data)


def _page_text(path: Path) -> str:
    p = _Text()
    p.feed(path.read_text(encoding="utf-8"))
    return "\n".join(p.parts)


@pytest.fixture(scope="module")
def screens(tmp_path_factory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("screens")
    said = {}
    said["run"] = gpubench("run", "--suite", "elementwise,gemm,launch,copy", "--backend", "cpu", "--quick",
                           "--out", out, "--cluster", "cpu")
    said["comm"] = gpubench("run", "--suite", "comm", "--backend", "cpu", "--quick", "--collectives", "all_reduce",
                            "--min-bytes", "1K", "--max-bytes", "64K", "--step-factor", "8", "--out", out,
                            "--cluster", "comm")
    runs = sorted((out / "cpu").iterdir()) + sorted((out / "comm").iterdir())
    for i, run in enumerate(runs):
        said[f"compare-{i}"] = gpubench("compare", run, run, "--all")
        said[f"markdown-{i}"] = gpubench("compare", run, run, "--all", "--format", "markdown")
    for k, log in enumerate(sorted(FIX.glob("*.txt")) + sorted(FIX.glob("*.json"))):
        if "corrupted" in log.name:
            continue
        said[f"import {log.name}"] = text = gpubench("import", "nccl-tests", log, "--out", out, "--cluster",
                                                     f"i{k}", ok=(0, 1))
        (imported,) = (out / f"i{k}").iterdir()
        said[f"compare {log.name}"] = gpubench("compare", imported, imported, "--all")
        assert "rows; run directory" in text
    gpubench("report", *runs, "--out", out / "page")
    said["report"] = _page_text(out / "page" / "index.html")
    return said


def _readable(text: str) -> str:
    """What people read, without the paths, run ids and hashes that are names rather than figures."""
    text = re.sub(r"/\S+", " ", text)
    text = re.sub(r"\d{8}T\d{6}Z-[0-9a-f]{6}", " ", text)
    return re.sub(r"\b(?=[0-9a-f]*[a-f])[0-9a-f]{6,}\b", " ", text)  # hex names hold a letter; figures do not


def test_no_raw_byte_count_in_what_people_read(screens):
    bad = {k: m.group(0) for k, t in screens.items() if (m := re.search(r"\w*bytes=\d{4,}", _readable(t)))}
    assert not bad, bad


def test_no_exponent_in_any_number(screens):
    bad = {k: m.group(0) for k, t in screens.items()
           if (m := re.search(r"\S*\d\.?\d*[eE][+-]?\d+\S*", _readable(t)))}
    assert not bad, bad


def test_one_dtype_vocabulary(screens):
    bad = {k: m.group(0) for k, t in screens.items()
           if (m := re.search(r"\b(float16|float32|float64|bfloat16|torch\.float\w*)\b", _readable(t)))}
    assert not bad, bad


def test_microseconds_are_us_everywhere(screens):
    bad = {k: m.group(0) for k, t in screens.items() if (m := re.search(r"(\d|\[)\s?us\b", _readable(t)))}
    assert not bad, bad
    assert any("µs" in t for t in screens.values())


def test_a_skip_reason_is_said_once(screens):
    # gemm on the CPU skips its GPU-only cases for one reason: one progress line, then a count
    # (in the progress lines: the summary table below names each reason once more, with its count)
    progress = [ln for ln in screens["run"].splitlines() if re.match(r"\[\d+/\d+\] ", ln)]
    said = [ln for ln in progress if "skipped: needs a GPU: backend 'cpu' runs only torch's fp32 and fp64 products" in ln]
    assert len(said) == 1, progress
    assert re.search(r"\d+ more case\(s\) skipped for a reason said above", screens["run"])
