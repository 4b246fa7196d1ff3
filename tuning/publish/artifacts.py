"""The artifact directory: compiled libraries stored by content (sha256)."""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class StoredArtifact:
    """A file in the artifact directory."""

    sha256: str
    size: int
    relpath: str  # relative to the artifact directory


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def publish(artifact_dir: Path, source: Path, suffix: str = ".so") -> StoredArtifact:
    """Copy ``source`` into ``artifact_dir/<sha[:2]>/<sha><suffix>``, durably (written to a temp
    name, fsynced, then renamed), unless a file with that content is already there."""
    sha = file_sha256(source)
    relpath = f"{sha[:2]}/{sha}{suffix}"
    final = artifact_dir / relpath
    if not final.exists():
        final.parent.mkdir(parents=True, exist_ok=True)
        partial = final.with_name(f".{final.name}.{os.getpid()}.partial")
        shutil.copyfile(source, partial)
        with open(partial, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(partial, final)
    return StoredArtifact(sha256=sha, size=final.stat().st_size, relpath=relpath)
