"""What a user's TVMScript may name, checked on its Python syntax tree before any child parses
it (raw TIR: `tuning.untrusted.user_tir.check_syntax`; Relax models:
`tuning.untrusted.user_model.check_relax_syntax`). A filter in front of the jail, not the jail.

TVMScript is Python: the parser evaluates the expressions it meets. So every name the source
reads must be one it binds itself (a parameter, a loop or block variable, a buffer) or one of
TVMScript's (``T``, ``I``, ``R``, ``range``, ...), no builtin may be rebound, and every
attribute chain is allow-listed, not deny-listed:

* ``T.x``, ``I.x``, ``R.x``: ``x`` one of TVMScript's names (`tuning.checks.tvmscript_names`,
  generated from the pinned TVM: no module such as ``I.entry``, whose ``inspect`` reaches
  ``builtins.exec``); ``T.axis.x``, ``R.nn.x`` and the other op namespaces one level deeper,
  never further;
* ``cls.f`` where ``cls`` is bound to the module's own class (``cls = Module``, as TVM prints
  Relax) and ``f`` is one of its functions;
* ``v.x`` on a name the source binds, ``x`` one of a buffer's attributes (`BOUND_ATTRIBUTES`);
* nothing else: no attribute of a call's result, a subscript or a literal, no chain deeper than
  the namespaces, no dunder name anywhere.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable, Collection

from tuning.checks.tvmscript_names import NAMESPACES

BUILTIN_NAMES = frozenset(dir(builtins))
ROOTS = frozenset({"T", "I", "R"})
BOUND_ATTRIBUTES = frozenset({"shape", "dtype", "data", "ndim", "strides", "elem_offset"})
Refuse = Callable[[str], Exception]


def _chain(node: ast.Attribute) -> tuple[ast.expr, list[str]]:
    """The root expression of an attribute chain and its attribute names, outermost first."""
    parts: list[str] = []
    current: ast.expr = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    return current, parts[::-1]


def _allowed_chain(
    root: ast.expr, parts: list[str], bound: Collection[str], aliases: set[str], funcs: set[str]
) -> bool:
    if not isinstance(root, ast.Name):
        return False
    if root.id in ROOTS:
        first = NAMESPACES[root.id]
        if len(parts) == 1:
            return parts[0] in first
        nested = NAMESPACES.get(f"{root.id}.{parts[0]}")
        return len(parts) == 2 and nested is not None and parts[1] in nested
    if len(parts) != 1:
        return False
    if root.id in aliases:
        return parts[0] in funcs
    return root.id in bound and parts[0] in BOUND_ATTRIBUTES


def check_script_names(
    tree: ast.Module, free_names: Collection[str], refuse: Refuse, skipped: Collection[int] = ()
) -> None:
    """Raise ``refuse(reason)`` unless every name ``tree`` reads is bound in it or one of
    ``free_names``, no builtin is bound, no name is a dunder, and every attribute chain is one
    the module docstring allows. Nodes whose ``id()`` is in ``skipped`` (a statement checked
    by its exact shape, as Relax's ``metadata = tvm.ir.load_json(...)``) are not walked."""
    nodes = [n for n in ast.walk(tree) if id(n) not in skipped]
    bound = {n.arg for n in nodes if isinstance(n, ast.arg)}
    bound |= {n.name for n in nodes if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    bound |= {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    shadowing = sorted(bound & (BUILTIN_NAMES | ROOTS))
    if shadowing:  # `for eval in range(1)` would otherwise make `eval` a "bound" name
        raise refuse(f"name {shadowing[0]!r} is a Python builtin and cannot be bound")
    classes = {n.name for n in nodes if isinstance(n, ast.ClassDef)}
    funcs = {
        item.name
        for n in nodes
        if isinstance(n, ast.ClassDef)
        for item in n.body
        if isinstance(item, ast.FunctionDef)
    }
    aliases = {
        target.id
        for n in nodes
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id in classes
        for target in n.targets
        if isinstance(target, ast.Name)
    }
    for node in nodes:
        line = getattr(node, "lineno", "?")
        name = getattr(node, "id", None) or getattr(node, "attr", None)
        if isinstance(name, str) and "__" in name:
            raise refuse(f"name {name!r} is not allowed (line {line})")
        if (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.id not in bound
            and node.id not in free_names
        ):
            raise refuse(f"name {node.id!r} is not allowed (line {line})")
    inner = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
    for node in nodes:
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            root, parts = _chain(node)
            if not _allowed_chain(root, parts, bound, aliases, funcs):
                text = ".".join([root.id if isinstance(root, ast.Name) else "(...)", *parts])
                raise refuse(
                    f"attribute {text[:80]!r} is not one TVMScript offers (line {node.lineno})"
                )
