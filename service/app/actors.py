"""Who acts on the service, as the use cases need to know it: `Identity` (its name, scopes and
the key its limits count under), and the rights checks that depend on what a request asks
(`require`, `require_owner`), refused as `service.app.refusals.Forbidden`. `service.web.auth`
builds the identity of a request; the worker acts as the service itself (no identity)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from schedules_db.tokens import ADMIN, TokenInfo
from service.app.refusals import Forbidden


@dataclass(frozen=True)
class Identity:
    """Who a request acts as: ``name`` (a token's name, ``local`` or ``anonymous``), its
    effective scopes, and the key its limits count under."""

    name: str
    scopes: frozenset[str]
    limit_key: str
    token: TokenInfo | None = None

    def can(self, scope: str) -> bool:
        """True when the identity holds ``scope`` (directly or implied)."""
        return scope in self.scopes

    def owns(self, submitted_by: str | None) -> bool:
        """May act on what ``submitted_by`` submitted: it is this identity, or an admin."""
        return self.can(ADMIN) or submitted_by == self.name

    @property
    def expires_at(self) -> datetime | None:
        """When the token stops working (None: never, or no token)."""
        return self.token.expires_at if self.token else None


def require(identity: Identity, scope: str, loc: Sequence[str], what: str) -> None:
    """403 unless ``identity`` holds ``scope``; ``what`` names what needs it."""
    if not identity.can(scope):
        raise Forbidden(scope, loc, f"{what} needs the {scope!r} scope ({identity.name} lacks it)")


def require_owner(identity: Identity, submitted_by: str | None, what: str, loc: str) -> None:
    """403 ``not_owner`` unless ``identity`` submitted ``what`` (e.g. "job 7", at path
    parameter ``loc``) or is an admin."""
    if not identity.owns(submitted_by):
        raise Forbidden(
            ADMIN,
            ("path", loc),
            f"{what} was submitted by {submitted_by}; only they or an admin may cancel it",
            "not_owner",
        )
