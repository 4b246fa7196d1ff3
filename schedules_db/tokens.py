"""API tokens: created on the server's host, shown once, kept only as a sha256.

Contract (what every caller may rely on):

* **Secrecy.** A token is ``thb_`` + 32 random bytes (`secrets.token_urlsafe`, 256 bits). Its text
  is returned once, by `TokenStore.create`, and never stored: the table holds its sha256 (hex).
  A slow password hash is not needed for random tokens of this entropy, and would make the
  per-request lookup slow.
* **Lookup** (`TokenStore.find`) is one indexed query on the hash (unique index), whatever the
  number of tokens; text without the prefix is refused without a query. `find` returns a token
  in any state; `TokenInfo.state` says whether it is ``active``, ``expired`` or ``revoked``, and
  only an active token authenticates anyone.
* **Identity.** A token's ``name`` is the identity it authenticates (what a job's
  ``submitted_by`` shows). Several tokens may share a name (rotation: create the new one, then
  revoke the old by id); `TokenStore.revoke` of a name revokes every active token of it.
  Names are ``[A-Za-z][A-Za-z0-9._@-]{0,63}``; ``local``, ``anonymous`` and ``import`` are
  reserved (the auth-off identity, the anonymous reader, the import verification jobs).
* **Scopes** are granted as a set of `SCOPES`; each implies the ones below it
  (`effective_scopes`): ``admin`` ⇒ everything, ``submit-code`` ⇒ ``submit`` ⇒ ``read``.
* **Revocation and expiry** are immediate here: the next `find` sees them (this store has no
  cache; the API keeps found rows for a fraction of a second, `service.web.token_cache`).
  Revocation is final; an expiry is fixed at creation.
"""

from __future__ import annotations

import builtins
import hashlib
import re
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, overload

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import sessionmaker

from schedules_db.tables import ApiTokenRow, utcnow

PREFIX = "thb_"
MARK_EVERY_S = 60.0
READ, SUBMIT, SUBMIT_CODE, ADMIN = "read", "submit", "submit-code", "admin"
SCOPES = (READ, SUBMIT, SUBMIT_CODE, ADMIN)
IMPLIES: dict[str, frozenset[str]] = {
    READ: frozenset({READ}),
    SUBMIT: frozenset({SUBMIT, READ}),
    SUBMIT_CODE: frozenset({SUBMIT_CODE, SUBMIT, READ}),
    ADMIN: frozenset(SCOPES),
}
NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9._@-]{0,63}")
RESERVED_NAMES = frozenset({"local", "anonymous", "import"})
RESERVED_NAMES_LOCAL = "local"  # with auth off a remote client is local@<address>: reserved too


def effective_scopes(granted: Iterable[str]) -> frozenset[str]:
    """Every scope the granted ones imply (unknown names are ignored)."""
    return frozenset().union(*(IMPLIES.get(scope, frozenset()) for scope in granted))


def hash_token(text: str) -> str:
    """The stored form of a token: the sha256 of its text, hex."""
    return hashlib.sha256(text.encode()).hexdigest()


@overload
def as_utc(value: datetime) -> datetime: ...
@overload
def as_utc(value: None) -> None: ...
def as_utc(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; every stored time is UTC."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value


@dataclass(frozen=True)
class TokenInfo:
    """A token as stored (never its text)."""

    id: int
    name: str
    scopes: tuple[str, ...]  # as granted, in `SCOPES` order
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None

    @classmethod
    def of(cls, row: Any) -> TokenInfo:
        """The info of a row (an `ApiTokenRow` or a Core row of its table)."""
        return cls(
            id=row.id,
            name=row.name,
            scopes=tuple(s for s in SCOPES if s in row.scopes),
            created_at=as_utc(row.created_at),
            expires_at=as_utc(row.expires_at),
            revoked_at=as_utc(row.revoked_at),
            last_used_at=as_utc(row.last_used_at),
        )

    @property
    def effective(self) -> frozenset[str]:
        """The granted scopes and every scope they imply."""
        return effective_scopes(self.scopes)

    def state(self, now: datetime | None = None) -> str:
        """``revoked``, ``expired`` or ``active`` at ``now`` (default: the current time)."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= (now or utcnow()):
            return "expired"
        return "active"


class TokenStore:
    """Create, find, list and revoke API tokens over one engine (see the module contract)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._marked: dict[int, float] = {}  # token id -> monotonic time of its last mark

    def due_for_mark(self, token_id: int, every_s: float = MARK_EVERY_S) -> bool:
        """True (and counted as done) when this process last marked the token's use more
        than ``every_s`` ago: ``last_used_at`` is written at most that often per process."""
        now = time.monotonic()
        if now - self._marked.get(token_id, -every_s) < every_s:
            return False
        self._marked[token_id] = now
        return True

    def create(
        self, name: str, scopes: Iterable[str], expires_at: datetime | None = None
    ) -> tuple[str, TokenInfo]:
        """A new token for identity ``name``; returns its text (the only time it exists
        outside the caller) and its info. ValueError for a bad name, an unknown or empty
        scope list, or an expiry in the past."""
        scopes = set(scopes)
        reserved = name in RESERVED_NAMES or name.startswith(f"{RESERVED_NAMES_LOCAL}@")
        if not NAME_PATTERN.fullmatch(name) or reserved:
            raise ValueError(
                f"token name {name!r} must match {NAME_PATTERN.pattern} and not be one of "
                f"{', '.join(sorted(RESERVED_NAMES))}"
            )
        if not scopes or scopes - set(SCOPES):
            raise ValueError(f"scopes must be a non-empty subset of {', '.join(SCOPES)}")
        expires_at = as_utc(expires_at)
        if expires_at is not None and expires_at <= utcnow():
            raise ValueError(f"expiry {expires_at.isoformat()} is in the past")
        text = PREFIX + secrets.token_urlsafe(32)
        row = ApiTokenRow(
            name=name,
            token_sha256=hash_token(text),
            scopes=[s for s in SCOPES if s in scopes],
            created_at=utcnow(),
            expires_at=expires_at,
        )
        with self._sessions.begin() as session:
            session.add(row)
            session.flush()
            return text, TokenInfo.of(row)

    def find(self, text: str) -> TokenInfo | None:
        """The token whose text this is, in any state; None if there is none."""
        if not text.startswith(PREFIX) or len(text) > 256:
            return None
        # One SELECT outside a transaction (no BEGIN/ROLLBACK round trips): it runs on every
        # authenticated request.
        query = select(ApiTokenRow.__table__).where(ApiTokenRow.token_sha256 == hash_token(text))
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            row = conn.execute(query).first()
        return None if row is None else TokenInfo.of(row)

    def get(self, token_id: int) -> TokenInfo | None:
        """The token with this id, in any state (a long request checks its token still is
        active); None if there is none."""
        query = select(ApiTokenRow.__table__).where(ApiTokenRow.id == token_id)
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            row = conn.execute(query).first()
        return None if row is None else TokenInfo.of(row)

    def list(self) -> list[TokenInfo]:
        """Every token (revoked and expired ones too), oldest first."""
        with self._sessions.begin() as session:
            rows = session.scalars(select(ApiTokenRow).order_by(ApiTokenRow.id))
            return [TokenInfo.of(row) for row in rows]

    # builtins.list: in this class, ``list`` names the method above
    def revoke(self, id_or_name: int | str) -> builtins.list[TokenInfo]:
        """Revoke the token with this id, or every active token of this name; returns the
        tokens revoked now (empty when none was active)."""
        now = utcnow()
        with self._sessions.begin() as session:
            where = (
                ApiTokenRow.id == id_or_name
                if isinstance(id_or_name, int)
                else ApiTokenRow.name == id_or_name
            )
            active = (ApiTokenRow.expires_at.is_(None)) | (ApiTokenRow.expires_at > now)
            rows = list(
                session.scalars(
                    select(ApiTokenRow).where(where, ApiTokenRow.revoked_at.is_(None), active)
                )
            )
            for row in rows:
                row.revoked_at = now
            session.flush()
            return [TokenInfo.of(row) for row in rows]

    def mark_used(self, token_id: int, at: datetime | None = None) -> None:
        """Record that the token authenticated a request (`due_for_mark` throttles this)."""
        with self._sessions.begin() as session:
            session.execute(
                update(ApiTokenRow)
                .where(ApiTokenRow.id == token_id)
                .values(last_used_at=at or utcnow())
            )
