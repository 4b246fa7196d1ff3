"""``reference/settings.md``: `service.shared.settings.Settings`, each field with its
``TUNEHUB_*`` variable, type, default, the comment beside it in the source and the flags that
set it."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import tokenize
from pathlib import Path
from typing import Any

from refgen.cli import commands
from refgen.markdown import GENERATED, cell, code, table, text


def settings_page() -> str:
    """The settings reference from the `Settings` dataclass and its source comments."""
    from service.entry import cli
    from service.shared import settings as module

    cls = module.Settings
    source = inspect.getsource(module)
    comments = _comments(source)
    tree = ast.parse(source)
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
    assigns = {
        n.target.id: n
        for n in body.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }
    readers = _env_readers(body)
    flags = _setting_flags(cli)
    described = _field_comments(list(assigns.values()), comments)
    rows = []
    for item in dataclasses.fields(cls):
        node = assigns[item.name]
        notes = described[item.name]
        reader = readers.get(item.name)
        variable = f"{module.ENV_PREFIX}{item.name.upper()}"
        if reader is None:
            env = "(not read from the environment)"
        else:
            env = code(variable)
            parse = getattr(module, reader, None)
            own = inspect.isfunction(parse) and parse.__module__ == module.__name__
            if own and parse.__doc__:
                notes += (" " if notes else "") + "Read as: " + parse.__doc__.strip()
        if item.name in flags:
            notes += (" " if notes else "") + "Flag: " + "; ".join(flags[item.name]) + "."
        default, factory_doc = _default(item, node, source)
        if factory_doc:
            notes += (" " if notes else "") + factory_doc
        rows.append([env, code(str(item.type)), default, cell(notes)])
    out = [
        GENERATED,
        "",
        "# Settings",
        "",
        text(cls.__doc__),
        "",
        f"Every setting is a field of `Settings` in `service/shared/settings.py`. "
        f"`Settings.from_env` reads each from its `{module.ENV_PREFIX}*` environment variable; "
        "command-line flags, where a command has one, win over the environment, which wins over "
        "the defaults. This page is generated from that class and the comments beside its "
        "fields.",
        "",
    ]
    out += table(["variable", "type", "default", "meaning"], rows)
    out += [
        "The client side (the `tunehub` client commands, `TunehubClient`, `TunehubDatabase`, "
        "`build`) reads `TUNEHUB_URL` (default `http://127.0.0.1:8000`) and `TUNEHUB_TOKEN`.",
        "",
    ]
    return "\n".join(out).rstrip() + "\n"


def _comments(source: str) -> tuple[dict[int, str], set[int]]:
    """Line number -> the comment on that line (tokenize: no ``#`` inside a string counts), and
    the lines that hold nothing but a comment."""
    found, alone = {}, set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            found[tok.start[0]] = tok.string.lstrip("#").strip()
            if tok.line.strip().startswith("#"):
                alone.add(tok.start[0])
    return found, alone


def _field_comments(
    fields: list[ast.AnnAssign], comments: tuple[dict[int, str], set[int]]
) -> dict[str, str]:
    """Each field's description: the comment lines right above it, and the comment at the end
    of its own line. A comment block above a field that has an end-of-line comment too heads a
    group ("Per identity ...", then one field a line, each with its own comment): it also
    describes the fields right after it that carry only an end-of-line comment, up to a blank
    line or the next comment block."""
    found, alone = comments
    described: dict[str, str] = {}
    block: list[str] = []
    previous_end = None
    for node in fields:
        above: list[str] = []
        line = node.lineno - 1
        while line in alone:
            above.insert(0, found[line])
            line -= 1
        trailing = [found[n] for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)
                    if n in found and n not in alone]  # fmt: skip
        adjacent = previous_end is not None and previous_end == node.lineno - 1
        if above:
            block = above if trailing else []
            lead = above
        elif adjacent and trailing and block:
            lead = block
        else:
            block, lead = [], []
        described[node.target.id] = " ".join([*lead, *trailing])  # type: ignore[union-attr]
        previous_end = node.end_lineno
    return described


def _env_readers(cls: ast.ClassDef) -> dict[str, str]:
    """Field -> the name of what parses its variable, from the ``(name, parser)`` pairs that
    ``from_env`` loops over."""
    from_env = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "from_env")
    readers = {}
    for node in ast.walk(from_env):
        if (
            isinstance(node, ast.Tuple)
            and len(node.elts) == 2
            and isinstance(node.elts[0], ast.Constant)
            and isinstance(node.elts[0].value, str)
            and isinstance(node.elts[1], ast.Name)
        ):
            readers[node.elts[0].value] = node.elts[1].id
    return readers


def _setting_flags(cli: Any) -> dict[str, list[str]]:
    """Setting -> the flags that set it: the keywords the CLI passes to ``Settings.from_env``
    (`service.entry.cli._settings`), matched to the parser's options by destination."""
    tree = ast.parse(inspect.getsource(cli))
    fields: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "from_env"
        ):
            fields |= {k.arg for k in node.keywords if k.arg}
    flags: dict[str, dict[str, set[str]]] = {}
    for command, parser in commands(cli.build_parser(token_commands=True)):
        for action in parser._actions:
            if action.dest in fields and action.option_strings:
                option = "/".join(action.option_strings)
                top = command.split()[1]  # "tunehub token create" -> "token"
                flags.setdefault(action.dest, {}).setdefault(option, set()).add(top)
    return {
        dest: [f"{code(opt)} ({', '.join(sorted(cmds))})" for opt, cmds in sorted(options.items())]
        for dest, options in flags.items()
    }


def _default(item: dataclasses.Field[Any], node: ast.AnnAssign, source: str) -> tuple[str, str]:
    """A field's default as shown (and the docstring of its default factory, if it has one)."""
    if item.default_factory is not dataclasses.MISSING:
        factory = item.default_factory
        name = getattr(factory, "__name__", repr(factory))
        return code(f"{name}()"), text(factory.__doc__ or "")
    value = item.default
    if value is None:
        return "none", ""
    if isinstance(value, Path):  # as written: Path("./x") shows ./x, not x
        call = node.value
        if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Constant):
            return code(str(call.args[0].value)), ""
        return code(str(value)), ""
    if value == ():
        return "empty", ""
    shown = code(str(value).lower() if isinstance(value, bool) else value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1024:
        shown += f" ({_bytes(value)})" if _bytes(value) else ""
    return shown, ""


def _bytes(value: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value % size == 0:
            return f"{value // size} {unit}"
    return ""
