"""docs/cli.md, the command-line reference, written from the parsers themselves: every command, every option with
its help, and the built-in suites' options of ``gpubench run``. ``python -m gpubench.cli.reference > docs/cli.md``
writes it; tests/test_docs.py fails when the committed page differs from what the parsers say, so an option cannot
be added without its line in the reference. It reads the parsers of gpubench.cli, never a parsed command line.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

HEADER = """\
# Command-line reference

Every `gpubench` command and every option it takes, with the help `gpubench COMMAND --help` prints. Options of
`gpubench run` that belong to one suite are listed under that suite; a suite installed as a plugin adds its own,
shown by `gpubench run --help`. Every command also takes `-h, --help`. Exit codes: 0 success; 1 a case failed or
compare found something WORSE; 2 bad input (one line saying what to do); 130 interrupted (README.md says more).

This page is generated from the command line's parsers
(`python -m gpubench.cli.reference > docs/cli.md`); tests/test_docs.py fails when it falls behind them.
"""


def parser() -> argparse.ArgumentParser:
    """Every command's parser, ``run`` with the built-in suites' options (by name), as ``gpubench`` builds it."""
    from gpubench.cli import build_parser
    from gpubench.registry import builtin_suites

    return build_parser(None, [cls for _, cls in sorted(builtin_suites().items())])


def render(top: argparse.ArgumentParser | None = None) -> str:
    """The reference page of ``top`` (default: :func:`parser`) as Markdown."""
    top = top or parser()
    commands = _commands(top)
    parts = [HEADER, "Commands: " + ", ".join(f"[{name}](#gpubench-{name})" for name, _, _ in commands) + ".\n",
             f"## `{top.prog}`\n", f"{top.description}\n" if top.description else "", _groups(top)]
    for name, summary, sub in commands:
        parts += [f"## `{sub.prog}`\n", f"{_text(summary)}.\n" if summary else "", "```\n" + _synopsis(sub) + "\n```\n",
                  _groups(sub) or "No options.\n"]
    return "\n".join(p for p in parts if p)


def _commands(top: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, the line --help shows for it, its parser) of each subcommand, in --help's order."""
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    return [(name, helps.get(name, ""), p) for name, p in sub.choices.items()]


def _shown(action: argparse.Action) -> bool:
    return action.help != argparse.SUPPRESS and not isinstance(
        action, (argparse._HelpAction, argparse._SubParsersAction))


def _groups(p: argparse.ArgumentParser) -> str:
    """Each argument group of ``p`` that has something to show: its arguments, then its options, then the groups
    it adds (a suite's options under ``run``), each under its title."""
    out = []
    for group in p._action_groups:
        actions = [a for a in group._group_actions if _shown(a)]
        if not actions:
            continue
        if group is p._positionals:
            title = "Arguments"
        elif group is p._optionals:
            title = "Options"
        else:
            title = f"Options for {_text(group.title or '')}"
        out.append(f"**{title}**\n\n" + "".join(_item(p.prog, a) for a in actions))
    return "\n".join(out)


def _item(prog: str, a: argparse.Action) -> str:
    """One argument or option: its words as typed, what it is, and its default where the help does not say."""
    notes = []
    if a.option_strings and a.required:
        notes.append("required")
    if isinstance(a, argparse._AppendAction):
        notes.append("repeatable")
    words = f"`{_invocation(a)}`" + (f" ({', '.join(notes)})" if notes else "")
    help_text = _expand(prog, a)
    default = _default(a)
    if default is not None and "default" not in help_text.lower():
        help_text += f" (default: {default})"
    return f"- {words}: {_text(help_text)}\n"


def _metavar(a: argparse.Action) -> str:
    if isinstance(a.metavar, str):
        return a.metavar
    if a.choices is not None:
        return "|".join(map(str, a.choices))
    return a.dest if not a.option_strings else a.dest.upper()


def _invocation(a: argparse.Action) -> str:
    """What is typed: ``--out DIR``, ``--quick``, ``PATH [PATH ...]``, as argparse's usage writes it."""
    m = _metavar(a)
    value = {None: m, "?": f"[{m}]", "*": f"[{m} ...]", "+": f"{m} [{m} ...]", 0: ""}.get(a.nargs, m)
    if not a.option_strings:
        return value
    return ", ".join(a.option_strings) + (f" {value}" if value else "")


def _synopsis(p: argparse.ArgumentParser) -> str:
    """The command with what it needs: its required options and its arguments; ``[OPTIONS]`` where it takes more."""
    needed = [_invocation(a) for a in p._actions if _shown(a) and a.option_strings and a.required]
    more = any(_shown(a) and a.option_strings and not a.required for a in p._actions)
    positionals = [_invocation(a) for a in p._actions if _shown(a) and not a.option_strings]
    return " ".join([p.prog, *needed, *(["[OPTIONS]"] if more else []), *positionals])


def _expand(prog: str, a: argparse.Action) -> str:
    """The help as argparse prints it: ``%(default)s`` and the like filled in, ``%%`` a percent sign."""
    params: dict[str, Any] = {k: v for k, v in dict(vars(a), prog=prog).items() if v is not argparse.SUPPRESS}
    params = {k: getattr(v, "__name__", v) for k, v in params.items()}
    if params.get("choices") is not None:
        params["choices"] = ", ".join(map(str, params["choices"]))
    return (a.help or "") % params


def _default(a: argparse.Action) -> str | None:
    """A default worth saying: not nothing, not a switch's False, not an empty list."""
    d = a.default
    if d is None or d is argparse.SUPPRESS or isinstance(d, bool) or d == [] or a.nargs == 0:
        return None
    return f"`{d}`"


def _text(text: str) -> str:
    """Help text as Markdown shows it verbatim: the characters that would start emphasis, code, HTML or a link
    escaped (an underscore inside a word is left alone: GitHub's Markdown reads it as itself)."""
    text = re.sub(r"([\\`*<>\[\]])", r"\\\1", text)
    return re.sub(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])", r"\\_", text)


def main(argv: list[str] | None = None) -> int:
    """``python -m gpubench.cli.reference``: the page on stdout."""
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        print("usage: python -m gpubench.cli.reference > docs/cli.md", file=sys.stderr)
        return 2
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
