"""Where check's health facts live: one module per fact under gpubench/check/facts/rules, registered in FACTS; the
readers apart from the rules; and no module reaching into another's private names."""

from __future__ import annotations

import ast
import json
import os
import pkgutil
from pathlib import Path

import pytest

from gpubench.check.facts import FactsWatch, FakeFacts, empty_seen, rules
from gpubench.check.facts.rules import FACTS, HEALTHY_POLL, HEALTHY_STATIC

ROOT = Path(__file__).resolve().parent.parent
RULES_DIR = ROOT / "gpubench" / "check" / "facts" / "rules"
FACT_MODULES = sorted(m.name for m in pkgutil.iter_modules([str(RULES_DIR)]) if m.name != "common")


def test_every_fact_module_is_registered_under_its_own_name():
    import importlib

    registered = [f.check for f in FACTS]
    for name in FACT_MODULES:
        fact = importlib.import_module(f"gpubench.check.facts.rules.{name}").FACT
        assert fact.check == name, f"rules/{name}.py declares check {fact.check!r}: name the module for its check"
        assert fact in FACTS, f"rules/{name}.py is not in rules.FACTS: its check would never be judged"
    assert sorted(registered) == FACT_MODULES and len(set(registered)) == len(registered)


def test_a_field_belongs_to_one_fact():
    owners: dict[str, list[str]] = {}
    for f in FACTS:
        for field in [*f.static, *f.poll]:
            owners.setdefault(field, []).append(f.check)
    assert not {k: v for k, v in owners.items() if len(v) > 1}
    assert set(HEALTHY_STATIC).isdisjoint(HEALTHY_POLL)


def test_every_polled_field_is_folded_and_seen():
    # pids are the watch's own to fold (ours or not); every other polled field needs its fact's fold, or no rule
    # would ever see it.
    assert set(HEALTHY_POLL) - {"pids"} == set(rules.FOLDS)
    assert set(rules.FOLDS) <= set(empty_seen())


def _judge_one(fact, over: dict) -> str:
    reader = FakeFacts([(0, None, None)], env={"GPUBENCH_FAKE_FACTS": json.dumps({"0": over})})
    watch = FactsWatch(reader, [0], own_pids=lambda: {os.getpid()})
    watch.poll_once()
    return fact.rule(0, reader.static(0), watch.seen(0), (), None).state


@pytest.mark.parametrize("fact", FACTS, ids=[f.check for f in FACTS])
def test_each_fact_passes_its_healthy_values_and_skips_when_its_fields_are_unknown(fact):
    assert _judge_one(fact, {}) == "PASS"
    # Every field the fact declares unknown, the others healthy: SKIP, never a PASS on missing data.
    assert _judge_one(fact, dict.fromkeys([*fact.static, *fact.poll])) == "SKIP"


def _imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every ``from module import name`` in ``path``, absolute modules only."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out += [(node.module, a.name) for a in node.names]
    return out


def test_rules_read_nothing_and_readers_judge_nothing():
    for path in RULES_DIR.glob("*.py"):
        bad = [m for m, _ in _imports(path) if m.startswith(("gpubench.check.facts.readers", "gpubench.check.facts.watch",
                                                               "gpubench.machine.telemetry"))]
        assert not bad, f"{path.name}: a rule judges fields; reading them is the readers' ({bad})"
    for path in (RULES_DIR.parent / "readers").glob("*.py"):
        bad = [(m, n) for m, n in _imports(path) if m.startswith("gpubench.check.facts.rules")
               and n not in {"CHECKS", "STATIC_KEYS", "POLL_KEYS", "HEALTHY_STATIC", "HEALTHY_POLL"}]
        assert not bad, f"readers/{path.name}: a reader takes the fields' names from the rules, never a rule ({bad})"


def test_no_library_or_suite_module_imports_another_modules_private_name():
    files = [*(ROOT / "gpubench").rglob("*.py"), *(ROOT / "suites").rglob("*.py")]
    bad = sorted(f"{p.relative_to(ROOT)}: from {m} import {n}" for p in files
                 for m, n in _imports(p) if m.startswith("gpubench") and n.startswith("_") and not n.startswith("__"))
    assert not bad, "make what is shared public (with a docstring) in the module that owns it:\n" + "\n".join(bad)


def test_the_package_lists_what_it_derives():
    assert rules.CHECKS == ("pcie_link", "ecc", "row_remap", "nvlink", "throttle", "processes")
    assert rules.STATIC_KEYS[:2] == ("pcie_max_gen", "pcie_max_width") and rules.POLL_KEYS[-1] == "pids"
