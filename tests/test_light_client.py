"""The light client is light: `service.client` and the `tunehub` command line (its help, the
parsing of a client command, a client command against a real server) work in a process where
the server's dependencies cannot be imported: a `sys.meta_path` finder refuses them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import ServerThread, free_port

ROOT = Path(__file__).resolve().parent.parent
# Third-party libraries of the server, the worker and TVM (the client CLI needs no TVM today).
BLOCKED_LIBRARIES = (
    "sqlalchemy",
    "alembic",
    "psycopg",
    "fastapi",
    "starlette",
    "pydantic",
    "uvicorn",
    "celery",
    "kombu",
    "redis",
    "tvm",
    "tvm_ffi",
    "numpy",
    "xgboost",
)
# Of our packages only these may load: the light client and the CLI's own stdlib-only modules
# (and the library check every download passes, standard library only too).
ALLOWED_SERVICE = (
    "tuning.checks.library_check",
    "service.client",
    "service.entry.cli",
    "service.entry.host_cli",
    "service.entry.token_cli",
    "service.entry.artifact_cli",
    "service.shared.settings",
    "service.entry.supervisor",
    "service.entry.top_level",
)
BLOCKER = f"""
import sys

class RefuseServer:
    '''Refuses the server's modules (ImportError), as if they were not installed.'''

    @staticmethod
    def find_spec(name, path=None, target=None):
        def under(*prefixes):
            return any(name == p or name.startswith(p + ".") for p in prefixes)

        ours = (under("schedules_db", "tuning") and name not in ("tuning", "tuning.publish")) or (
            under("service") and name not in ("service", "service.entry", "service.shared")
        )
        if under(*{BLOCKED_LIBRARIES!r}) or (ours and not under(*{ALLOWED_SERVICE!r})):
            raise ImportError(f"{{name}} is not installed (blocked by test_light_client)")
        return None

sys.meta_path.insert(0, RefuseServer)
"""


def run_light(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter behind the blocker; fails the test if it fails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEHUB_")}
    done = subprocess.run(
        [sys.executable, "-c", BLOCKER + textwrap.dedent(code)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_the_blocker_refuses_the_server() -> None:
    run_light(
        """
        for name in ("sqlalchemy", "fastapi", "celery", "tvm", "schedules_db", "service.api",
                     "service.entry.app", "service.worker", "service.shared.queue",
                     "tuning.catalog", "tuning.search", "tuning.jail", "tuning.untrusted",
                     "tuning.measure"):
            try:
                __import__(name)
            except ImportError:
                continue
            raise SystemExit(f"{name} imported")
        """
    )


def test_client_and_cli_help_import_no_server() -> None:
    done = run_light(
        """
        import contextlib, io
        from service.client import IntegrityError, TunehubClient, TunehubError
        from service.entry.cli import build_parser, main

        for argv in (["--help"], ["fetch", "--help"], ["status", "--help"], ["submit", "--help"]):
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
                main(argv)
            assert "usage: tunehub" in out.getvalue(), (argv, out.getvalue())
            print(out.getvalue())
        args = build_parser(token_commands=False).parse_args(
            ["submit", "matmul", "--param", "M=64", "--target", '{"kind": "llvm"}', "--wait"]
        )
        assert args.operator == "matmul" and args.param == [("M", 64)] and args.wait, args
        assert args.func.__module__ == "service.client.commands"
        """
    )
    for command in ("serve", "worker", "token", "submit", "fetch", "whoami", "operators"):
        assert command in done.stdout


def test_a_client_command_talks_to_a_real_server(tmp_path: Path) -> None:
    app = create_app(Settings(data_dir=tmp_path), run_reaper=False)
    with ServerThread(app) as server:
        done = run_light(
            f"""
            from service.entry.cli import main

            assert main(["operators", "--server", {server.url!r}]) == 0
            assert main(["whoami", "--server", {server.url!r}]) == 0
            assert main(["status", "999", "--server", {server.url!r}]) == 2  # HTTP 404
            bad = ["submit", "matmul", "--param", "M=0", "--param", "N=4", "--param", "K=4"]
            assert main([*bad, "--trials", "4", "--server", {server.url!r}]) == 2  # HTTP 422
            """
        )
    assert "matmul" in done.stdout and "conv2d" in done.stdout
    assert done.stdout.count("\n") > 5
    assert "local:" in done.stdout  # whoami with auth off
    assert "HTTP 404" in done.stderr
    # A 422 reads as one line per refused field, not as FastAPI's JSON list.
    assert "HTTP 422: 1 field(s) refused" in done.stderr
    assert "  operator.params.M: Input should be greater than or equal to 1 (got 0)" in done.stderr


def test_a_server_that_does_not_answer_is_one_line_and_exit_5() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    done = run_light(
        f"""
        from service.entry.cli import main

        assert main(["status", "1", "--server", {url!r}]) == 5
        assert main(["model", "1", "--server", {url!r}]) == 5
        """
    )
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"tunehub: no answer from {url}/api/v1/jobs/1")
    assert "is `tunehub serve` running there?" in lines[1]


def test_cli_tables_stay_aligned_when_cells_are_long() -> None:
    from service.client.commands import table

    rows = [["1", "conv2d", "N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1,layout=NCHW", "1.5"],
            ["22", "matmul", "M=4,N=4,K=4", "123.25"]]  # fmt: skip
    text = table(["id", "operator", "params", "latency_us"], rows, right={0, 3})
    lines = text.splitlines()
    assert len({len(line) for line in lines}) == 1  # every row as wide as the widest
    starts = {line.index(word) for line, word in zip(lines, ("params", "N=1", "M=4"), strict=True)}
    assert len(starts) == 1  # the params column starts at one place on every row
    assert lines[2].startswith("22") and lines[1].startswith(" 1")
