"""What a downloaded library must pass before the client keeps it where anything could load
it: `tuning.checks.library_check` (no constructor, indirect function, search path or call
beyond TVM's runtime and libm), the same check the worker runs on what it builds. Every
download of a schedule's or a model's library goes through `check_download`."""

from __future__ import annotations

from pathlib import Path

from service.client.errors import UnsafeArtifact


def check_download(path: Path, what: str) -> None:
    """`UnsafeArtifact` (naming ``what``) unless the library at ``path`` passes the check."""
    from tuning.checks.library_check import UnsafeLibrary, check_library

    try:
        check_library(path)
    except UnsafeLibrary as err:
        raise UnsafeArtifact(f"{what} is refused, not loaded: {err}") from None
