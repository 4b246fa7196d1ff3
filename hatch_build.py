"""The wheel's build hook: fetches the dashboard's third-party assets from npm into
``service/dashboard/static/vendor`` (git-ignored: nothing third-party is committed), so that the
wheel, and an editable install, carry every script and stylesheet the server serves.

Each asset is pinned in pyproject.toml (``[[tool.hatch.build.hooks.custom.npm]]``): a package, an
exact version, the sha512 integrity the npm registry publishes for its tarball, and the files
taken from it (its licence among them). The tarball comes from ``npm pack`` (npm's own cache,
registry and proxy settings) and is refused unless its sha512 matches the pin; only the named
files are extracted. A folder that already holds what the pins name (``.pins.json``) is kept
as it is, so a rebuild needs neither npm nor the network.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PINS_FILE = ".pins.json"


class NpmAssetsHook(BuildHookInterface):  # type: ignore[type-arg]
    """Fills the vendor folder before a wheel (or an editable install) is built."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        vendor = Path(self.root) / self.config["vendor-dir"]
        fetch_pinned(self.config["npm"], vendor)
        build_data["artifacts"].append(f"/{self.config['vendor-dir']}/*")


def fetch_pinned(pins: list[dict[str, Any]], vendor: Path) -> None:
    """Make ``vendor`` hold exactly the files ``pins`` name, from their verified tarballs."""
    wanted = json.dumps(pins, sort_keys=True)
    stamp = vendor / PINS_FILE
    names = [name for pin in pins for name in pin["files"].values()]
    complete = all((vendor / name).is_file() for name in names)
    if complete and stamp.is_file() and stamp.read_text() == wanted:
        return
    if shutil.which("npm") is None:
        raise RuntimeError("building tunehub needs npm (the dashboard's assets come from npm)")
    with tempfile.TemporaryDirectory(prefix="tunehub-npm-") as scratch:
        staged = Path(scratch) / "vendor"
        staged.mkdir()
        for pin in pins:
            tarball = _pack(pin["package"], pin["version"], Path(scratch))
            _check_integrity(tarball, pin)
            _extract(tarball, pin, staged)
        (staged / PINS_FILE).write_text(wanted)
        if vendor.exists():
            shutil.rmtree(vendor)
        vendor.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(staged, vendor)


def _pack(package: str, version: str, into: Path) -> Path:
    """The package's tarball, as ``npm pack`` downloads it (no install, no dependencies)."""
    done = subprocess.run(
        ["npm", "pack", "--json", "--pack-destination", str(into), f"{package}@{version}"],
        capture_output=True,
        text=True,
        check=False,
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
