"""The light client: what builds and scripts use to talk to a tunehub server over HTTP.

Imports with only httpx installed (and `tvm` for the build-side Database): nothing of
`schedules_db`, `service.api`, FastAPI, Celery or SQLAlchemy.
"""

from service.client.http import IntegrityError, TunehubClient, TunehubError

__all__ = ["IntegrityError", "TunehubClient", "TunehubError"]
