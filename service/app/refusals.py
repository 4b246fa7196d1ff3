"""Why the service refuses a request, said without HTTP. Use cases, read views and admission
raise these; `service.web.refused` answers each with the status and body the API has always
given. A row missing where the schema forbids it is not one: `service.app.rows.MissingRow`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

NOT_TUNED = "not_tuned"  # the ``type`` of the 404 when no verified best exists


class Refused(Exception):
    """A request the service refuses; ``msg`` says why."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self.msg = msg


class NotFound(Refused):
    """Nothing is ``what`` ``key`` (a 404)."""

    def __init__(self, what: str, key: Any) -> None:
        super().__init__(f"{what} {key} not found")
        self.what = what
        self.key = key


class InvalidInput(Refused):
    """The field at ``loc`` breaks the rule ``kind`` (a 422); ``value`` is what it held."""

    def __init__(self, loc: Sequence[str | int], msg: str, kind: str, value: Any = None) -> None:
        super().__init__(msg)
        self.loc = tuple(loc)
        self.kind = kind
        self.value = value


class InvalidFields(Refused):
    """Pydantic's ``errors`` of a nested model, re-rooted at ``prefix`` (a 422)."""

    def __init__(self, errors: Iterable[Mapping[str, Any]], prefix: Sequence[str]) -> None:
        self.errors = list(errors)
        super().__init__(f"{len(self.errors)} invalid field(s) under {'.'.join(prefix)}")
        self.prefix = tuple(prefix)


class Forbidden(Refused):
    """The caller lacks ``scope`` (or, with another ``kind``, another right) for what ``loc``
    names (a 403)."""

    def __init__(
        self, scope: str, loc: Sequence[str], msg: str, kind: str = "insufficient_scope"
    ) -> None:
        super().__init__(msg)
        self.scope = scope
        self.loc = tuple(loc)
        self.kind = kind


class TooMany(Refused):
    """A quota of the caller's is exhausted: try again after ``retry_after_s`` (a 429)."""

    def __init__(self, msg: str, kind: str, retry_after_s: float) -> None:
        super().__init__(msg)
        self.kind = kind
        self.retry_after_s = retry_after_s


class Unavailable(Refused):
    """Something the request needs is not available on this host (a 503)."""

    def __init__(self, msg: str, kind: str) -> None:
        super().__init__(msg)
        self.kind = kind


class NothingTuned(Refused):
    """No verified best exists for the key a client named (a 404 of type `NOT_TUNED`)."""

    def __init__(
        self,
        msg: str,
        workload: str,
        target: dict[str, str | None],
        operator: str | None,
        params: dict[str, Any],
        tvm_series: str | None,
    ) -> None:
        super().__init__(msg)
        self.workload = workload
        self.target = target
        self.operator = operator
        self.params = params
        self.tvm_series = tvm_series
