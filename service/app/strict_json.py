"""Strict JSON reading, without HTTP: what Python's ``json`` accepts but JSON, SQL or the store
cannot hold is refused as `JsonRejected`, naming where (``loc``), why and the rule (``kind``):

* ``NaN``, ``Infinity`` and ``-Infinity`` (Python's ``json`` reads them) → ``finite_number``;
* containers nested deeper than `MAX_DEPTH` → ``json_too_deep`` (also where ``json`` itself
  would overflow the stack); objects with more than `MAX_KEYS` keys → ``too_many_keys``;
* text holding NUL (PostgreSQL cannot store it) or an unpaired UTF-16 surrogate (it has no
  UTF-8 form) → ``string_unicode`` (`bad_text`);
* integer literals too long to convert (over 4300 digits) and bytes that are not UTF-8 →
  ``json_invalid``.

`service.web.strict_input` reads request bodies with it; `service.app.usecases.best_schedule`
a query parameter's JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 32  # levels of nested arrays/objects in a request body
MAX_KEYS = 1000  # keys of one JSON object in a request body
# Only an escape can put NUL or a lone surrogate in a JSON string: strings are checked when one
# of these appears in the body text.
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")


class JsonRejected(Exception):
    """JSON that Python reads but the service refuses: where (``loc``), why, the rule (``kind``)."""

    def __init__(self, loc: tuple[str | int, ...], msg: str, kind: str) -> None:
        super().__init__(msg)
        self.loc = loc
        self.msg = msg
        self.kind = kind


def bad_text(text: str) -> str | None:
    """Why ``text`` cannot be stored (NUL, an unpaired surrogate), or None."""
    if "\x00" in text:
        return "text must not contain NUL characters"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "text must not contain unpaired UTF-16 surrogates"
    return None


class _NonFinite:
    """Stands for a NaN/Infinity literal until the walk finds where it is."""


_NON_FINITE = _NonFinite()


def loads(body: bytes) -> Any:
    """The JSON value of ``body``, or `JsonRejected` (see the module docstring). Syntax errors
    raise ``json.JSONDecodeError`` as ``json.loads`` does (FastAPI makes them a 422)."""
    try:
        value = json.loads(body, parse_constant=lambda _: _NON_FINITE)
    except RecursionError:
        raise JsonRejected(
            ("body",), f"JSON nested deeper than {MAX_DEPTH} levels", "json_too_deep"
        ) from None
    except json.JSONDecodeError:
        raise
    except ValueError as err:  # an integer literal too long to convert; not UTF-8
        raise JsonRejected(("body",), f"invalid JSON: {err}", "json_invalid") from None
    _check(value, check_text=_SUSPECT_ESCAPE.search(body) is not None)
    return value


def _check(root: Any, check_text: bool) -> None:
    """Walk the containers iteratively: depth, non-finite numbers and (``check_text``) text."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(root, ())]
    while stack:
        value, path = stack.pop()
        if value is _NON_FINITE:
            raise JsonRejected(
                ("body", *path),
                "NaN and Infinity are not JSON numbers; give a finite number",
                "finite_number",
            )
        if isinstance(value, str):
            if reason := bad_text(value):
                raise JsonRejected(("body", *path), reason, "string_unicode")
            continue
        if isinstance(value, dict):
            if len(value) > MAX_KEYS:
                raise JsonRejected(
                    ("body", *path), f"an object with more than {MAX_KEYS} keys", "too_many_keys"
                )
            items: Any = value.items()
        elif isinstance(value, list):
            items = enumerate(value)
        else:
            continue
        if len(path) >= MAX_DEPTH:
            raise JsonRejected(
                ("body", *path), f"JSON nested deeper than {MAX_DEPTH} levels", "json_too_deep"
            )
        for key, item in items:
            if check_text and isinstance(key, str) and (reason := bad_text(key)):
                raise JsonRejected(("body", *path, key[:64]), reason, "string_unicode")
            if (
                item is _NON_FINITE
                or isinstance(item, (dict, list))
                or (check_text and isinstance(item, str))
            ):
                stack.append((item, (*path, key)))
