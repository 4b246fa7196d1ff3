"""The application layer's refusals (`service.app.refusals`) as HTTP answers: each is built by
the helper that built it before the layer existed and answered by the same handler, so status,
headers and body are the API's as they always were.

=================  =========================================  ======  =========================
refusal            built by                                   status  answered by
=================  =========================================  ======  =========================
``InvalidInput``   `service.web.errors.invalid`               422     `validation_error_handler`
``InvalidFields``  `service.web.errors.prefixed`              422     `validation_error_handler`
``NotFound``       `service.web.errors.not_found`             404     `http_error_handler`
``Forbidden``      `service.web.auth.forbidden`               403     `refusal_handler`
``TooMany``        `service.web.quotas.too_many`              429     `refusal_handler`
``Unavailable``    `service.web.refusals.Refusal` (503)       503     `refusal_handler`
``NothingTuned``   `service.web.refusals.Refusal` (404)       404     `refusal_handler`
=================  =========================================  ======  =========================
"""

from __future__ import annotations

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response

from service.app.refusals import (
    NOT_TUNED,
    Forbidden,
    InvalidFields,
    InvalidInput,
    NotFound,
    NothingTuned,
    Refused,
    TooMany,
    Unavailable,
)
from service.web.auth import forbidden
from service.web.errors import (
    http_error_handler,
    invalid,
    not_found,
    prefixed,
    validation_error_handler,
)
from service.web.quotas import too_many
from service.web.refusals import Refusal, refusal_handler


def http_error(refused: Refused) -> HTTPException | RequestValidationError:
    """The HTTP error ``refused`` is answered as (the table above)."""
    if isinstance(refused, InvalidInput):
        return invalid(refused.loc, refused.msg, refused.kind, refused.value)
    if isinstance(refused, InvalidFields):
        return prefixed(refused.errors, refused.prefix)
    if isinstance(refused, NotFound):
        return not_found(refused.what, refused.key)
    if isinstance(refused, Forbidden):
        return forbidden(refused.scope, refused.loc, refused.msg, refused.kind)
    if isinstance(refused, TooMany):
        return too_many(refused.msg, refused.kind, refused.retry_after_s)
    if isinstance(refused, Unavailable):
        return Refusal(503, refused.msg, refused.kind)
    if isinstance(refused, NothingTuned):
        return Refusal(
            404,
            refused.msg,
            NOT_TUNED,
            workload=refused.workload,
            target=refused.target,
            operator=refused.operator,
            params=refused.params,
            tvm_series=refused.tvm_series,
        )
    raise TypeError(f"no HTTP answer for {type(refused).__name__}")


async def refused_handler(request: Request, exc: Exception) -> Response:
    """Answer a `Refused` (register with ``app.add_exception_handler(Refused, ...)``)."""
    assert isinstance(exc, Refused)
    error = http_error(exc)
    if isinstance(error, RequestValidationError):
        return await validation_error_handler(request, error)
    if isinstance(error, Refusal):
        return await refusal_handler(request, error)
    return await http_error_handler(request, error)
