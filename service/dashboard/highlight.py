"""Syntax highlighting of the scheduled TIR (TVMScript is Python) and the trace (JSON), done on
the server by Pygments: its HTML formatter escapes every character of the text, so what a
user sent shows as text, never as markup. Colours come from ``static/highlight.css``, made
once from a Pygments style (`stylesheet`)."""

from __future__ import annotations

from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import JsonLexer, PythonLexer

_FORMATTER = HtmlFormatter(nowrap=True, classprefix="hl-")
MAX_CHARS = 400_000  # longer texts are shown plain (escaped): highlighting them takes seconds


def _highlighted(text: str, lexer: PythonLexer | JsonLexer) -> Markup:
    if len(text) > MAX_CHARS:
        return Markup.escape(text)
    return Markup(highlight(text, lexer, _FORMATTER))  # noqa: S704 - Pygments escapes the text


def highlight_python(text: str) -> Markup:
    """``text`` (TVMScript) as escaped HTML with highlighting spans."""
    return _highlighted(text, PythonLexer())


def highlight_json(text: str) -> Markup:
    """``text`` (JSON) as escaped HTML with highlighting spans."""
    return _highlighted(text, JsonLexer())


def stylesheet() -> str:
    """The CSS of the highlighting classes (Pygments' ``default`` style)."""
    css: str = HtmlFormatter(classprefix="hl-", style="default").get_style_defs(".code")
    return css
