"""The wheel's build hook (hatch_build.py) with the pins of pyproject.toml: it fetches what they
name from npm, refuses a tarball whose sha512 is not the pin (and leaves the folder as it was),
keeps a folder that still matches its record, and fetches again a file changed since."""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # hatchling's own dependency there
    import tomli as tomllib

from hatch_build import fetch_pinned, vendored_names

ROOT = Path(__file__).resolve().parent.parent


def pins() -> list[dict[str, Any]]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    hook = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["hooks"]["custom"]
    return [pin for pin in hook["npm"] if pin["package"] == "uplot"]  # the smallest tarball


def test_a_pinned_fetch_is_kept_until_a_file_changes(tmp_path: Path) -> None:
    vendor, record = tmp_path / "static" / "vendor", tmp_path / "build" / "record.json"
    fetch_pinned(pins(), vendor, record)
    assert sorted(p.name for p in vendor.iterdir()) == sorted(vendored_names(pins()))
    script = vendor / "uPlot.iife.min.js"
    assert f"uPlot (v{pins()[0]['version']})".encode() in script.read_bytes()
    assert "MIT" in (vendor / "uPlot.LICENSE").read_text()

    inode = script.stat().st_ino
    fetch_pinned(pins(), vendor, record)  # unchanged: kept as it is
    assert script.stat().st_ino == inode

    script.write_text("alert(1)")  # changed since: fetched again, the folder replaced whole
    fetch_pinned(pins(), vendor, record)
    assert f"uPlot (v{pins()[0]['version']})".encode() in script.read_bytes()
    assert not [p for p in vendor.parent.iterdir() if p.name != "vendor"]


def test_a_tarball_that_is_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    vendor, record = tmp_path / "vendor", tmp_path / "record.json"
    vendor.mkdir()
    (vendor / "keep.txt").write_text("as it was")
    wrong = copy.deepcopy(pins())
    wrong[0]["integrity"] = "sha512-" + "A" * 86 + "=="
    with pytest.raises(RuntimeError, match=re.escape("is not the pinned sha512-AAAA")):
        fetch_pinned(wrong, vendor, record)
    assert [p.name for p in vendor.iterdir()] == ["keep.txt"]
    assert not record.exists()
