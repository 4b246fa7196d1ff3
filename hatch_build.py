"""The wheel's build hook: fetches the dashboard's third-party assets from npm into
``service/dashboard/static/vendor`` (git-ignored: nothing third-party is committed), so that the
wheel, and an editable install, carry every script and stylesheet the server serves.

Each asset is pinned in pyproject.toml (``[[tool.hatch.build.targets.wheel.hooks.custom.npm]]``):
a package, an exact version, the sha512 integrity the npm registry publishes for its tarball,
and the files taken from it (its licence among them). The tarball comes from ``npm pack`` (npm's
own cache, registry and proxy settings) and is refused unless its sha512 matches the pin; only
the named files are extracted, into a new folder that replaces the old one whole.

What was fetched is recorded in ``build/npm-vendor.json`` (outside the served folder): the pins
and each file's sha256. A folder whose files still match that record, for the same pins, is
kept as it is, so a rebuild needs neither npm nor the network; a file changed since is fetched
again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

RECORD = Path("build") / "npm-vendor.json"  # under the project root
NPM_TIMEOUT_S = 300


class NpmAssetsHook(BuildHookInterface):  # type: ignore[type-arg]
    """Fills the vendor folder before a wheel (or an editable install) is built."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root, vendor_dir, pins = Path(self.root), self.config["vendor-dir"], self.config["npm"]
        fetch_pinned(pins, root / vendor_dir, root / RECORD)
        build_data["artifacts"] += [f"/{vendor_dir}/{name}" for name in vendored_names(pins)]


def vendored_names(pins: list[dict[str, Any]]) -> list[str]:
    """The file names the pins put in the vendor folder."""
    return [name for pin in pins for name in pin["files"].values()]


def fetch_pinned(pins: list[dict[str, Any]], vendor: Path, record: Path) -> None:
    """Make ``vendor`` hold exactly the files ``pins`` name, from their verified tarballs,
    unless it already does (``record``: what the last fetch wrote)."""
    if _still_fetched(pins, vendor, record):
        return
    if shutil.which("npm") is None:
        raise RuntimeError("building tunehub needs npm (the dashboard's assets come from npm)")
    vendor.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tunehub-npm-") as scratch:
        staged = Path(tempfile.mkdtemp(prefix=".vendor-", dir=vendor.parent))
        try:
            for pin in pins:
                tarball = _pack(pin["package"], pin["version"], Path(scratch))
                _check_integrity(tarball, pin)
                _extract(tarball, pin, staged)
            _swap_in(staged, vendor)
        finally:
            shutil.rmtree(staged, ignore_errors=True)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"pins": pins, "sha256": _hashes(pins, vendor)}, sort_keys=True))


def _still_fetched(pins: list[dict[str, Any]], vendor: Path, record: Path) -> bool:
    try:
        fetched = json.loads(record.read_text())
        return bool(fetched["pins"] == pins and fetched["sha256"] == _hashes(pins, vendor))
    except (OSError, ValueError, KeyError):
        return False


def _hashes(pins: list[dict[str, Any]], vendor: Path) -> dict[str, str]:
    return {n: hashlib.sha256((vendor / n).read_bytes()).hexdigest() for n in vendored_names(pins)}


def _swap_in(staged: Path, vendor: Path) -> None:
    """Replace ``vendor`` by ``staged`` (same parent folder): never a half-written folder."""
    staged.chmod(0o755)
    old = vendor.with_name(f".vendor-old-{os.getpid()}")
    if vendor.exists():
        vendor.rename(old)
    staged.rename(vendor)
    shutil.rmtree(old, ignore_errors=True)


def _pack(package: str, version: str, into: Path) -> Path:
    """The package's tarball, as ``npm pack`` downloads it (no install, no dependencies)."""
    done = subprocess.run(
        ["npm", "pack", "--json", "--pack-destination", str(into), f"{package}@{version}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=NPM_TIMEOUT_S,
    )
    if done.returncode != 0:
        raise RuntimeError(f"npm pack {package}@{version} failed: {done.stderr.strip()}")
    return into / json.loads(done.stdout)[0]["filename"]


def _check_integrity(tarball: Path, pin: dict[str, Any]) -> None:
    digest = base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
    if f"sha512-{digest}" != pin["integrity"]:
        raise RuntimeError(
            f"{pin['package']}@{pin['version']}: the tarball's sha512-{digest} is not the pinned"
            f" {pin['integrity']}"
        )


def _extract(tarball: Path, pin: dict[str, Any], staged: Path) -> None:
    """Copy the pinned files out of the tarball (npm puts them under ``package/``), applying
    the pin's text replacements (``replace``: file -> [old, new])."""
    with tarfile.open(tarball, "r:gz") as archive:
        for inside, name in pin["files"].items():
            member = archive.extractfile(f"package/{inside}")
            if member is None:
                raise RuntimeError(f"{pin['package']}: package/{inside} is not a file")
            data = member.read()
            old_new = pin.get("replace", {}).get(name)
            if old_new:
                old, new = (part.encode() for part in old_new)
                if old not in data:
                    raise RuntimeError(f"{pin['package']}: {inside} no longer holds {old!r}")
                data = data.replace(old, new)
            (staged / name).write_bytes(data)
