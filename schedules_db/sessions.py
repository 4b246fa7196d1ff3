"""Dashboard sessions: a browser's login, opened with an API token, kept only as a sha256.

Contract:

* **Secrecy.** A session id is 32 random bytes (`secrets.token_urlsafe`); its text lives only in
  the browser's ``HttpOnly`` cookie. The table holds its sha256, as for tokens.
* **Bound to its token.** `DashboardSessions.find` returns the token the session was opened
  with, in whatever state that token is now: revoking or expiring the token ends every session
  opened with it at the next request. A session also ends at its own expiry (at the latest the
  token's) and at `DashboardSessions.end` (logout), which deletes its row.
* **Lookup** is one indexed query joining the session to its token.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from sqlalchemy import Engine, delete, insert, select

from schedules_db.tables import ApiTokenRow, DashboardSessionRow, utcnow
from schedules_db.tokens import TokenInfo, as_utc, hash_token

SESSION_BYTES = 32


class DashboardSessions:
    """Open, find and end dashboard sessions over one engine (see the module contract)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def open(self, token: TokenInfo, lifetime: timedelta) -> tuple[str, datetime]:
        """A new session for an active ``token``: its id (the cookie's value) and its expiry,
        ``lifetime`` from now or the token's expiry, whichever comes first."""
        text = secrets.token_urlsafe(SESSION_BYTES)
        expires = utcnow() + lifetime
        if token.expires_at is not None and token.expires_at < expires:
            expires = token.expires_at
        with self.engine.begin() as conn:
            conn.execute(
                insert(DashboardSessionRow).values(
                    session_sha256=hash_token(text),
                    token_id=token.id,
                    created_at=utcnow(),
                    expires_at=expires,
                )
            )
            # Expired sessions of any token are dropped as new ones open.
            conn.execute(
                delete(DashboardSessionRow).where(DashboardSessionRow.expires_at <= utcnow())
            )
        return text, expires

    def find(self, text: str) -> TokenInfo | None:
        """The token of an unexpired session with this id (in the token's current state);
        None for an unknown, ended or expired session."""
        if not text or len(text) > 128:
            return None
        query = (
            select(ApiTokenRow.__table__, DashboardSessionRow.expires_at.label("session_expires"))
            .join(DashboardSessionRow, DashboardSessionRow.token_id == ApiTokenRow.id)
            .where(DashboardSessionRow.session_sha256 == hash_token(text))
        )
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            row = conn.execute(query).first()
        if row is None or as_utc(row.session_expires) <= utcnow():
            return None
        return TokenInfo.of(row)

    def end(self, text: str) -> bool:
        """End (delete) the session with this id; False if there was none."""
        with self.engine.begin() as conn:
            result = conn.execute(
                delete(DashboardSessionRow).where(
                    DashboardSessionRow.session_sha256 == hash_token(text)
                )
            )
        return bool(result.rowcount)
