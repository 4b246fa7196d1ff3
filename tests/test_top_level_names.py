"""A server or worker refuses an environment where another distribution also installed one of
tunehub's top-level packages (`service.entry.top_level`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from service.entry.top_level import clash_refusal, clashes


def fake_distribution(site: Path, name: str, top_level: str) -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "top_level.txt").write_text(top_level + "\n")


def test_no_clash_in_the_test_environment() -> None:
    assert clashes() == {}
    assert clash_refusal() is None


def test_another_distribution_claiming_service_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_distribution(tmp_path, "other-service", "service")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert clashes() == {"service": ["other-service"]}
    refusal = clash_refusal()
    assert refusal is not None and "'service' is also installed by other-service" in refusal


@pytest.mark.parametrize("command", [["serve", "--workers", "0"], ["worker", "--no-supervise"]])
def test_serve_and_worker_refuse_to_start_beside_a_clash(
    tmp_path: Path, command: list[str]
) -> None:
    fake_distribution(tmp_path / "site", "other-tuning", "tuning")
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from service.entry.cli import main; sys.exit(main())",
         *command, "--data-dir", str(tmp_path / "data")],
        env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parent.parent,
    )  # fmt: skip
    assert done.returncode == 2
    assert "'tuning' is also installed by other-tuning" in done.stderr
    assert not (tmp_path / "data").exists()
