"""`tunehub token create|list|revoke`: token administration, run on the server's host against
the store (the database URL comes from the same flags and ``TUNEHUB_*`` variables as `serve`).
This is how the first admin token is made; nothing here goes through the API.

The store (SQLAlchemy) is imported only when a token command runs or its parser is built, so
that `tunehub --help` and the client commands stay light.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from typing import TYPE_CHECKING

from service.shared.settings import Settings

if TYPE_CHECKING:
    from schedules_db.tokens import TokenInfo, TokenStore

DURATION = re.compile(r"(\d+)\s*([smhdw])")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_expiry(text: str, now: datetime | None = None) -> datetime:
    """``30d``, ``12h``, ``2w`` (from now) or an ISO date / date-time (UTC unless it says
    otherwise; a date means its midnight) as an aware UTC datetime."""
    match = DURATION.fullmatch(text.strip())
    if match:
        amount, unit = int(match.group(1)), match.group(2)
        return (now or datetime.now(timezone.utc)) + timedelta(**{UNITS[unit]: amount})
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        try:
            value = datetime.combine(date.fromisoformat(text.strip()), datetime.min.time())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"--expires takes 30d/12h/2w or an ISO date, got {text!r}"
            ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def _tokens(settings: Settings) -> TokenStore:
    # Deferred: the store pulls in SQLAlchemy, which only the token commands need.
    from schedules_db import make_engine, upgrade_schema
    from schedules_db.tokens import TokenStore

    engine = make_engine(settings.store_url)
    upgrade_schema(engine)  # the first token may come before the first `serve`
    return TokenStore(engine)


def _describe(info: TokenInfo) -> str:
    expires = info.expires_at.isoformat(timespec="seconds") if info.expires_at else "never"
    return f"token {info.id} for {info.name} ({', '.join(info.scopes)}), expires {expires}"


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def cmd_create(args: argparse.Namespace, settings: Settings) -> int:
    """Create a token; its text goes to stdout (the only time it is shown), the rest to
    stderr, so ``TOKEN=$(tunehub token create ...)`` captures just the token."""
    try:
        text, info = _tokens(settings).create(args.name, args.scope, args.expires)
    except ValueError as err:
        print(f"tunehub: {err}", file=sys.stderr)
        return 2
    print(f"{_describe(info)}; shown once, keep it now:", file=sys.stderr)
    print(text)
    return 0


def cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    """Every token (never its text): id, name, scopes, state, dates."""
    rows = _tokens(settings).list()
    print(
        f"{'id':>4}  {'name':<20} {'scopes':<26} {'state':<8} {'created':<20} "
        f"{'expires':<20} last used"
    )
    for t in rows:
        print(
            f"{t.id:>4}  {t.name:<20} {','.join(t.scopes):<26} {t.state():<8} "
            f"{_when(t.created_at):<20} {_when(t.expires_at):<20} {_when(t.last_used_at)}"
        )
    return 0


def cmd_revoke(args: argparse.Namespace, settings: Settings) -> int:
    """Revoke a token by id, or every active token of a name; non-zero when none was."""
    key: int | str = int(args.token) if args.token.isdigit() else args.token
    revoked = _tokens(settings).revoke(key)
    for info in revoked:
        print(f"revoked {_describe(info)}")
    if not revoked:
        print(f"tunehub: no active token {args.token!r}", file=sys.stderr)
        return 1
    return 0


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    data_options: Callable[[argparse.ArgumentParser], None],
    settings_of: Callable[[argparse.Namespace], Settings],
    subcommands: bool = True,
) -> None:
    """Add `token` and (unless ``subcommands`` is false: `token` is listed, not parsed) its
    subcommands to the `tunehub` parser."""
    token = sub.add_parser("token", help="create, list or revoke API tokens (on the server host)")
    actions = token.add_subparsers(dest="token_command", required=True)
    if not subcommands:
        return
    # Deferred: the scope names are the store's (schedules_db imports SQLAlchemy).
    from schedules_db.tokens import SCOPES

    def bind(
        p: argparse.ArgumentParser, func: Callable[[argparse.Namespace, Settings], int]
    ) -> None:
        data_options(p)
        p.set_defaults(func=lambda args: func(args, settings_of(args)))

    p = actions.add_parser("create", help="create a token and print it once")
    p.add_argument("--name", required=True, help="the identity the token authenticates")
    p.add_argument(
        "--scope",
        action="append",
        required=True,
        choices=SCOPES,
        help="repeatable; admin > submit-code > submit > read (each implies those after it)",
    )
    p.add_argument("--expires", type=parse_expiry, help="30d, 12h, 2w or an ISO date (UTC)")
    bind(p, cmd_create)

    p = actions.add_parser("list", help="list tokens (never their text)")
    bind(p, cmd_list)

    p = actions.add_parser("revoke", help="revoke a token by id, or every token of a name")
    p.add_argument("token", metavar="ID_OR_NAME")
    bind(p, cmd_revoke)
