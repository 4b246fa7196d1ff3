"""``/api/v1/me``: who the request's token is and what it may do."""

from __future__ import annotations

from fastapi import APIRouter

from schedules_db.tokens import SCOPES
from service.api.deps import SettingsDep
from service.app.responses.common import iso
from service.app.responses.fleet import MeOut
from service.web.auth import Reader

router = APIRouter(tags=["auth"])


@router.get("/me", response_model=MeOut)
def me(who: Reader, settings: SettingsDep) -> MeOut:
    """The identity, its scopes (``granted`` on the token, ``scopes`` with what they imply),
    the token's id and expiry, and the limits that apply to it."""
    token = who.token
    return {
        "identity": who.name,
        "auth": settings.auth,
        "token_id": token.id if token else None,
        "granted": list(token.scopes) if token else [s for s in SCOPES if s in who.scopes],
        "scopes": [s for s in SCOPES if s in who.scopes],
        "expires_at": iso(token.expires_at) if token else None,
        "limits": {
            "write_rate_per_s": settings.write_rate_per_s,
            "write_burst": settings.write_burst,
            "max_active_jobs": settings.max_active_jobs,
            "max_trials": settings.max_trials,
        },
    }
