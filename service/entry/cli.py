"""The `tunehub` command line.

On a server host: serve (the API and local workers), worker (a worker for some targets), token
(create, list or revoke API tokens), artifacts (move artifacts into the database, collect
garbage). Against a server, over HTTP: submit, status, cancel, watch, schedules, fetch, export,
import, workers, whoami, operators; for whole models: submit-model, model, cancel-model,
fetch-model.
"""
# The client commands live in the light client (`service.client.commands`); the server-host
# commands import the server (store, API, worker) only when they run, so `tunehub --help` and
# every client command need nothing but httpx (tests/test_light_client.py).

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import cast

import httpx

from service.client import IntegrityError, TunehubError
from service.client.commands import add_parsers as add_client_parsers
from service.client.model_commands import add_parsers as add_model_parsers
from service.entry import artifact_cli, host_cli, token_cli
from service.shared.settings import Settings


def _settings(args: argparse.Namespace) -> Settings:
    return Settings.from_env(
        data_dir=Path(args.data_dir) if getattr(args, "data_dir", None) else None,
        database_url=getattr(args, "database_url", None),
        broker_url=getattr(args, "broker_url", None),
        auth=getattr(args, "auth", None),
        anonymous_reads=getattr(args, "anonymous_reads", None),
    )


def _data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", help="data folder (default ./tunehub-data)")
    p.add_argument("--database-url", help="SQLAlchemy URL of the store")
    p.add_argument("--broker-url", help="Celery broker URL")


def build_parser(token_commands: bool = True) -> argparse.ArgumentParser:
    """The argument parser of `tunehub`. With ``token_commands=False`` the `token` command is
    listed without its subcommands: their ``--scope`` choices come from the store (SQLAlchemy),
    which only a `token` command line needs."""
    parser = argparse.ArgumentParser(
        prog="tunehub", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    host_cli.add_parsers(sub, _data_options, _settings)
    token_cli.add_parser(sub, _data_options, _settings, subcommands=token_commands)
    artifact_cli.add_parser(sub, _data_options, _settings)
    add_client_parsers(sub)
    add_model_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `tunehub` console script."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(token_commands=argv[:1] == ["token"]).parse_args(argv)
    try:
        return cast(int, args.func(args))
    except TunehubError as err:
        print(f"tunehub: {err.describe()}", file=sys.stderr)
        return 2
    except IntegrityError as err:
        print(f"tunehub: {err}", file=sys.stderr)
        return 3
    except httpx.TransportError as err:  # refused, reset, timed out: no answer at all
        where = err.request.url if _has_request(err) else "the server"
        print(f"tunehub: no answer from {where}: {err} (is `tunehub serve` running there? "
              "--server or TUNEHUB_URL names it)", file=sys.stderr)  # fmt: skip
        return 5
    except KeyboardInterrupt:
        return 130


def _has_request(err: httpx.TransportError) -> bool:
    try:
        err.request  # noqa: B018 - raises when the error carries none
    except RuntimeError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
