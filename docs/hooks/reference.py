"""MkDocs hook: the reference pages the code already knows, generated at build time.

* ``reference/rest.md``: the app's OpenAPI document (`service.entry.app.create_app`, built over a
  temporary data folder; nothing is started, nothing is written there): every path and method
  with its parameters, request body and responses, then every component schema
  (`refgen.rest`).
* ``reference/settings.md``: `service.shared.settings.Settings`: each field's ``TUNEHUB_*``
  variable, type, default and the comment beside it in the source (`refgen.settings`).
* ``reference/cli.md``: the ``tunehub`` argument parser (`service.entry.cli.build_parser`):
  every command with its arguments, defaults and help (`refgen.cli`).

The pages exist only in the build (``File.generated``); nothing is written into ``docs/``.
Registered in ``mkdocs.yml`` under ``hooks:``. The same code gives the same pages.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

HOOKS = Path(__file__).resolve().parent


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated reference pages to the build."""
    root = Path(config.config_file_path).resolve().parent
    for path in (str(HOOKS), str(root)):  # the generators; the repository's packages
        if path not in sys.path:
            sys.path.insert(0, path)
    writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ in docs/
    try:
        from refgen.cli import cli_page
        from refgen.rest import rest_page
        from refgen.settings import settings_page
    finally:
        sys.dont_write_bytecode = writes

    pages: dict[str, Callable[[], str]] = {
        "reference/rest.md": rest_page,
        "reference/settings.md": settings_page,
        "reference/cli.md": cli_page,
    }
    for uri, render in pages.items():
        files.append(File.generated(config, uri, content=render()))
    return files
