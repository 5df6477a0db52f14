"""The seams between the packages are typed: a parameter annotated bare ``Any`` says nothing of what crosses it, so
there are few of them in gpubench/ and suites/ (a vendor library's handle, an option's value), and the Protocols
the lower floors name are satisfied by the real classes a floor above them.

The Protocols are checked by structure, read from the classes themselves: each member is there (a method with the
Protocol's parameters, or an attribute: a class attribute, a dataclass field, a property or one ``__init__`` sets).
"""

from __future__ import annotations

import argparse
import ast
import inspect
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 40


def _bare_any(base: Path) -> list[str]:
    """``path:line function(parameter)`` for each parameter annotated exactly ``Any`` (not ``*args``, ``**kwargs``,
    ``typing.Any`` spelled in full nor a container of Any)."""
    out = []
    for path in sorted(base.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs):
                    if isinstance(arg.annotation, ast.Name) and arg.annotation.id == "Any":
                        out.append(f"{path.relative_to(base.parent)}:{node.lineno} {node.name}({arg.arg})")
    return out


def test_few_parameters_are_bare_any():
    found = _bare_any(ROOT / "gpubench") + _bare_any(ROOT / "suites")
    assert len(found) <= LIMIT, (f"{len(found)} parameters annotated bare Any (at most {LIMIT}): name what crosses "
                                 "(a Protocol of the module that owns it, the real class, object, a union):\n"
                                 + "\n".join(found))


def test_the_count_counts_what_it_should(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(textwrap.dedent("""\
        import typing
        from typing import Any

        def f(a: Any, b: int, *args: Any, c: Any = None, **kwargs: Any) -> Any: ...
        def g(d: typing.Any, e: list[Any], h: object) -> None: ...
        """))
    assert _bare_any(tmp_path / "pkg") == ["pkg/m.py:4 f(a)", "pkg/m.py:4 f(c)"]


# --- the Protocols and the classes that satisfy them --------------------------------------------------------


def _set_in_init(cls: type) -> set[str]:
    """Attributes ``self.X = ...`` assigned in the class's own methods (its ``__init__`` and what that calls)."""
    names: set[str] = set()
    for klass in cls.__mro__[:-1]:
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
            for t in targets:
                for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
                        names.add(e.attr)
    return names


def _protocol_members(proto: type) -> dict[str, object]:
    members = {}
    for klass in proto.__mro__:
        if klass is object or not getattr(klass, "_is_protocol", False) or klass.__name__ in ("Protocol", "Generic"):
            continue
        members.update({n: v for n, v in vars(klass).items() if not n.startswith("_")})
        members.update({n: None for n in getattr(klass, "__annotations__", {}) if n not in members})
    return members


def _params(fn: object) -> list[inspect.Parameter]:
    return list(inspect.signature(fn).parameters.values())[1:]  # without self


def _missing(cls: type, proto: type) -> list[str]:
    """What ``cls`` lacks of ``proto``: a member it does not have, or a method that does not take the Protocol's
    parameters (by position and name; a parameter with a default in the Protocol has one in the class)."""
    attrs = set(dir(cls)) | _set_in_init(cls) | set(getattr(cls, "__dataclass_fields__", {}))
    out = []
    for name, member in _protocol_members(proto).items():
        if name not in attrs:
            out.append(f"{name}: not there")
        elif inspect.isfunction(member):
            impl = getattr(cls, name, None)
            if not callable(impl):
                out.append(f"{name}: not a method")
                continue
            theirs = _params(impl)
            takes_rest = {p.kind for p in theirs} & {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}
            for k, p in enumerate(_params(member)):
                if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                    if p.kind not in takes_rest:
                        out.append(f"{name}: takes no {p}")
                    continue
                same = next((q for q in theirs if q.name == p.name), None)
                if same is None and takes_rest:
                    continue
                if same is None or (p.kind != inspect.Parameter.KEYWORD_ONLY and theirs.index(same) != k):
                    out.append(f"{name}: no parameter {p.name} at {k}")
                elif p.default is not inspect.Parameter.empty and same.default is inspect.Parameter.empty:
                    out.append(f"{name}: {p.name} has no default")
    return out


def _pairs() -> list[tuple[type, type]]:
    from gpubench.backends.base import Backend, GraphCapture, Runnable, RunnableMethod
    from gpubench.backends.fake import FakeGraphs
    from gpubench.compare.comparison import TableRun
    from gpubench.compare.cross import SideRuns
    from gpubench.compare.load import Side
    from gpubench.console import ProgressSink, RunProgress
    from gpubench.machine.other_runs import Keyed
    from gpubench.options import ArgumentAdder
    from gpubench.ranks.group import Group
    from gpubench.ranks.rank_group import RankGroup
    from gpubench.report.runs import Run
    from gpubench.results.rundir import RunDir, RunRecord, Unwritten
    from gpubench.suite import Method, Workload
    from gpubench.timing.batches import Limits
    from gpubench.timing.engine import EngineConfig

    return [(Group, RankGroup), (RunProgress, ProgressSink), (RunDir, RunRecord), (Unwritten, RunRecord),
            (Workload, Runnable), (Method, RunnableMethod), (FakeGraphs, GraphCapture), (EngineConfig, Limits),
            (Side, SideRuns), (Run, TableRun), (Backend, Keyed), (argparse.ArgumentParser, ArgumentAdder),
            (type(argparse.ArgumentParser().add_argument_group("g")), ArgumentAdder)]


def test_the_real_classes_satisfy_the_seams():
    bad = [f"{cls.__qualname__} as {proto.__qualname__}: {m}" for cls, proto in _pairs() for m in _missing(cls, proto)]
    assert not bad, "\n".join(bad)


def test_each_seam_is_a_protocol_with_members():
    for _, proto in _pairs():
        assert getattr(proto, "_is_protocol", False), proto
        assert _protocol_members(proto), proto


def test_the_structural_check_finds_what_is_missing():
    from gpubench.ranks.rank_group import RankGroup

    class Half:
        def __init__(self):
            self.rank = 0

        def gather_objects(self, thing):  # another parameter's name
            return [thing]

        def account(self, wait, deadline_s):  # no defaults
            return "", "failed", False

    missing = _missing(Half, RankGroup)
    assert "world_size: not there" in missing and "max: not there" in missing
    assert "gather_objects: no parameter obj at 0" in missing
    assert "account: wait has no default" in missing and "account: deadline_s has no default" in missing
    assert not any(m.startswith("rank:") for m in missing)
