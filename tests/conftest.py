import os
import sys

import pytest

from gpubench.backends.fake import FakeBackend
from gpubench.suite import Check, Method, Workload


@pytest.fixture(autouse=True, scope="session")
def _own_cache(tmp_path_factory):
    """The suites' declarations (gpubench.declared) are cached in a folder of this session, not the user's: the
    commands the tests start read and write that one too."""
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before


@pytest.fixture(autouse=True, scope="session")
def _own_runs_folder(tmp_path_factory):
    """The gpubench runs the tests start see each other (gpubench.machine.other_runs), not those of another session on the same
    machine: a test's run beside another's would be named shared, and its rows would say so."""
    before = os.environ.get("GPUBENCH_RUNS_DIR")
    os.environ["GPUBENCH_RUNS_DIR"] = str(tmp_path_factory.mktemp("runs"))
    yield
    if before is None:
        os.environ.pop("GPUBENCH_RUNS_DIR", None)
    else:
        os.environ["GPUBENCH_RUNS_DIR"] = before


@pytest.fixture
def fake():
    return FakeBackend()


def make_workload(bytes=1000, flops=0, ok=True, cache="warm", footprint=None, calls=None):
    """A workload that records each input set it is called with; its inputs are integers."""
    counter = {"made": 0}
    seen = calls if calls is not None else []

    def make_inputs():
        counter["made"] += 1
        return counter["made"]

    def run(x):
        seen.append(x)
        return x

    def check(inputs, out):
        return Check(ok, 0.0 if ok else 1.0, 0.5, "" if ok else "wrong answer")

    w = Workload(run=run, make_inputs=make_inputs, bytes=bytes, flops=flops, check=check, footprint=footprint,
                 method=Method(cache=cache))
    w.counter = counter
    w.seen = seen
    return w


@pytest.fixture
def extra_format(monkeypatch, tmp_path):
    """``install(package, name, source)``: a format module of ``source`` as ``package.name`` for this test only (a
    new output format is one file in its owner's outputs package)."""
    added = []

    def install(package, name, source):
        folder = tmp_path / "formats"
        folder.mkdir(exist_ok=True)
        (folder / f"{name}.py").write_text(source)
        monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
        monkeypatch.delitem(sys.modules, f"{package.__name__}.{name}", raising=False)
        added.append(f"{package.__name__}.{name}")

    yield install
    for module in added:
        sys.modules.pop(module, None)
