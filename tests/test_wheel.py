"""The wheel is the product: built from a clean copy of the repository (what git tracks and does
not ignore: no vendor folder, no venv), installed alone into a fresh venv, its `tunehub serve`
serves every script and stylesheet each dashboard page names.

The copy is the working tree's (tracked and untracked files that git does not ignore), so the
test checks the change at hand, not the last commit. The build runs with build isolation, as
`pip wheel .` does for a user: the build hook (hatch_build.py) fetches the npm assets itself.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import httpx
import pytest

from service.entry.top_level import TOP_LEVEL
from tests.conftest import free_port
from tests.e2e.helpers import stop, wait_http

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parent.parent
VENDOR = "service/dashboard/static/vendor/"
# What the pins in pyproject.toml take from npm: the scripts, the styles and their licences.
VENDORED = {
    "uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE",
    "swagger-ui-bundle.js", "swagger-ui.css", "swagger-ui.LICENSE", "swagger-ui.NOTICE",
    "swagger-ui-bundle.js.LICENSE.txt",
    "redoc.standalone.js", "redoc.LICENSE", "redoc.standalone.js.LICENSE.txt",
}  # fmt: skip
PAGES = ("/", "/schedules", "/compare", "/jobs", "/workers", "/submit", "/login", "/docs",
         "/redoc")  # fmt: skip
ASSET = re.compile(r"""<(?:script[^>]*\bsrc|link[^>]*\bhref)="(/static/[^"]+)\"""")


def clean_copy(into: Path) -> Path:
    """The repository as a fresh clone of this working tree has it."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.split(b"\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / os.fsdecode(name)
        if source.is_file():  # a file deleted but not yet staged is listed too
            target = into / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    assert not (into / VENDOR).exists()
    return into


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = clean_copy(tmp_path_factory.mktemp("clone"))
    dist = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    (found,) = dist.glob("tunehub-*.whl")
    return found


def test_the_wheel_holds_the_packages_and_the_licensed_npm_assets(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == set(TOP_LEVEL)
    assert {name.removeprefix(VENDOR) for name in names if name.startswith(VENDOR)} == VENDORED
    assert "schedules_db/migrations/script.py.mako" in names
    assert not [name for name in names if "__pycache__" in name or name.startswith("tests/")]


def test_the_installed_wheel_serves_every_script_and_stylesheet(
    wheel: Path, tmp_path: Path
) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    # --no-compile: the venv is thrown away, and byte-compiling TVM's modules took ~10 s of ~33.
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-compile", str(wheel)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr

    # Nothing of the repository on the path: the server runs from site-packages alone.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TUNEHUB_", "PYTHON"))}
    port = free_port()
    log = tmp_path / "serve.log"
    command = [str(env_dir / "bin" / "tunehub"), "serve", "--workers", "0", "--port", str(port),
               "--data-dir", str(tmp_path / "data")]  # fmt: skip
    handle = log.open("wb")  # noqa: SIM115 - closed by stop()
    server = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=handle,
                              stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    server.log_handle = handle  # type: ignore[attr-defined]
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/healthz", server, log)
        with httpx.Client(base_url=url, timeout=30) as client:
            # A page with an id needs its row: a queued job (no worker takes it).
            job = client.post(
                "/api/v1/jobs",
                json={"operator": {"name": "matmul", "params": {"M": 8, "N": 8, "K": 8}},
                      "target": "host", "trials": 4},
            )  # fmt: skip
            assert job.status_code == 201, job.text
            assets: set[str] = set()
            for page in (*PAGES, f"/jobs/{job.json()['id']}"):
                answer = client.get(page)
                assert answer.status_code == 200, (page, answer.status_code)
                named = set(ASSET.findall(answer.text))
                assert named, f"{page} names no script or stylesheet"
                assets |= named
            assert {f"/static/vendor/{name}" for name in VENDORED if "LICENSE" not in name
                    and "NOTICE" not in name} <= assets  # fmt: skip
            for asset in sorted(assets):
                answer = client.get(asset)
                assert answer.status_code == 200 and answer.content, asset
    finally:
        stop(server)
    where = subprocess.run(
        [str(python), "-c", "import service; print(service.__file__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert str(env_dir) in where and str(ROOT) not in where
