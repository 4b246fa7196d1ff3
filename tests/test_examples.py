"""The scripts in examples/ run as a user runs them, against a real `tunehub serve` (SQLite
store and broker, local workers) with a tiny budget: each submits its model, waits, builds
its own module with the tuned schedules, checks it against the untuned build and the
server's compiled library, and prints the speed-up."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.helpers import start_serve, stop

pytestmark = pytest.mark.e2e
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
# The transformer block has 11 tasks: a model's budget gives each task at least one trial.
TRIALS = "12"
SPEEDUP = re.compile(r"^tuned \d+\.\d+ ms, untuned \d+\.\d+ ms: speed-up \d+\.\d+x$", re.M)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh `tunehub serve` with two local workers (the two examples tune at once)."""
    tmp = tmp_path_factory.mktemp("examples")
    proc, url, _ = start_serve(tmp, "--workers", "2")
    try:
        yield url
    finally:
        assert stop(proc) == [], "serve left processes behind"


def _wait_for_models(server: str, count: int, proc: subprocess.Popen[str]) -> None:
    """Until the server holds ``count`` models (or ``proc`` ended)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if len(httpx.get(f"{server}/api/v1/models", timeout=10).json()) >= count:
            return
        time.sleep(0.5)


def test_each_example_tunes_builds_checks_and_prints_its_speedup(server: str) -> None:
    """Both examples tune at once (two workers); the second is started once the first's model
    is stored, since one identity's uploads are parsed one at a time (a 429 otherwise)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEHUB_")}
    runs = {}
    for count, name in enumerate(("cnn.py", "transformer_block.py"), start=1):
        runs[name] = subprocess.Popen(
            [sys.executable, str(EXAMPLES / name), "--server", server, "--trials", TRIALS],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        _wait_for_models(server, count, runs[name])
    for name, proc in runs.items():
        try:
            output, _ = proc.communicate(timeout=600)
        finally:
            proc.kill()
        assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{output[-4000:]}"
        assert re.search(rf"^model \d+: \d+ tasks, {TRIALS} trials$", output, re.M), output
        assert "  succeeded: " in output, output
        assert "outputs agree: our tuned build, our untuned build, the server's library" in output
        assert SPEEDUP.search(output), output
