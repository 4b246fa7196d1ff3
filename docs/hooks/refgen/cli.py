"""``reference/cli.md``: the ``tunehub`` argument parser, every command with its arguments,
defaults and help."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from refgen.markdown import GENERATED, cell, code, slug, table, text


def cli_page() -> str:
    """The command-line reference from the ``tunehub`` argument parser."""
    from service.entry import cli

    parser = cli.build_parser(token_commands=True)
    out = [
        GENERATED,
        "",
        "# Command line",
        "",
        text(parser.description),
        "",
        "Generated from the `tunehub` argument parser (`service.entry.cli.build_parser`). "
        "Guides: [CLI and HTTP](../cli-and-http.md), [Deploy](../deploy.md), "
        "[Security](../security.md#tokens).",
        "",
    ]
    out += table(
        ["command", "does"],
        [[f"[{code(name)}](#{slug(name)})", cell(about)] for name, about in _summaries(parser)],
    )
    for name, sub in commands(parser):
        out += _command(name, sub)
    return "\n".join(out).rstrip() + "\n"


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, Any]]:
    """(name, help, parser) of each subcommand, in the parser's order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name) or "", sub


def commands(
    parser: argparse.ArgumentParser, prefix: str = "tunehub"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command that runs something, nested ones included, as (full name, parser)."""
    for name, _help, sub in _subparsers(parser):
        full = f"{prefix} {name}"
        if any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
            yield from commands(sub, full)
        else:
            yield full, sub


def _summaries(parser: argparse.ArgumentParser, prefix: str = "tunehub") -> list[tuple[str, str]]:
    rows = []
    for name, about, sub in _subparsers(parser):
        full = f"{prefix} {name}"
        if any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
            rows += _summaries(sub, full)
        else:
            rows.append((full, about))
    return rows


def _command(name: str, parser: argparse.ArgumentParser) -> list[str]:
    formatter = argparse.HelpFormatter(name, width=10_000)
    positionals, options = [], []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        about = formatter._expand_help(action) if action.help else ""
        if action.choices and not isinstance(action, argparse._SubParsersAction):
            about += (
                (" " if about else "")
                + "Choices: "
                + ", ".join(code(str(c)) for c in action.choices)
                + "."
            )
        if action.option_strings:
            metavar = ""
            if action.nargs != 0:
                plain = action.choices is not None and action.metavar is None  # choices: below
                metavar = (
                    action.dest.upper()
                    if plain
                    else formatter._format_args(action, action.dest.upper())
                )
            names = ", ".join(code(f"{o} {metavar}".strip()) for o in action.option_strings)
            if isinstance(action, argparse._AppendAction) and "repeatable" not in about.lower():
                about += (" " if about else "") + "Repeatable."
            options.append([names, _cli_default(action), cell(about)])
        else:
            metavar = formatter._format_args(action, action.dest)
            positionals.append([code(metavar), cell(about)])
    out = [f"## {name}", ""]
    if parser.description:
        out += [text(parser.description), ""]
    formatter = argparse.HelpFormatter(name, width=10_000)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, "")
    out += ["```text", formatter.format_help().strip(), "```", ""]
    if positionals:
        out += table(["argument", "meaning"], positionals)
    if options:
        out += table(["option", "default", "meaning"], options)
    return out


def _cli_default(action: argparse.Action) -> str:
    default = action.default
    if isinstance(action, argparse.BooleanOptionalAction):
        return {True: "on", False: "off"}.get(default, "")
    if default is None or default == argparse.SUPPRESS or default == [] or action.nargs == 0:
        return ""
    return code(str(default))
