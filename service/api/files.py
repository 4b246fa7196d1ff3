"""Serving a stored file (a schedule's library, a compiled model) from the artifact store:
content-addressed, so its sha256 is its ``ETag`` and ``If-None-Match`` gets a 304. The bytes
are served only from a verified local file (`service.shared.artifact_files`)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Request
from fastapi.responses import FileResponse, Response
from starlette.concurrency import run_in_threadpool

from schedules_db.blobs import BlobCorrupt, BlobMissing, BlobUnavailable
from schedules_db.values import Artifact
from service.shared.artifact_files import ArtifactFiles
from service.web.errors import not_found
from service.web.refusals import Refusal, refusal_schema

log = logging.getLogger("tunehub.artifacts")
STORE_RETRY_S = 5

# What an artifact download may answer when the store fails it (besides 200/304/404).
STORE_FAILURES: dict[int | str, dict[str, Any]] = {
    502: refusal_schema(
        "the stored bytes do not match their sha256: never served (type artifact_corrupt)"
    ),
    503: refusal_schema(
        "the artifact store could not be read; retry (type artifact_store_unavailable)",
        {"Retry-After": "seconds"},
    ),
}


async def artifact_response(
    request: Request, files: ArtifactFiles, artifact: Artifact, filename: str
) -> Response:
    """The artifact's bytes as ``filename`` (``ETag`` and ``X-Content-SHA256``: its sha256),
    a 304 when the request already holds it, a 404 when the store lost it, a 502 when its bytes
    are damaged, a 503 when the store is unreachable: never a partial 200."""
    headers = {"ETag": f'"{artifact.sha256}"', "X-Content-SHA256": artifact.sha256}
    if request.headers.get("if-none-match") == headers["ETag"]:
        return Response(status_code=304, headers=headers)
    try:
        path = await run_in_threadpool(files.verified_file, artifact)
    except BlobMissing:
        raise not_found("artifact file", artifact.sha256) from None
    except BlobCorrupt as err:
        raise Refusal(502, str(err), "artifact_corrupt") from None
    except BlobUnavailable as err:
        log.warning("artifact %s: the store failed: %s", artifact.sha256, err)
        raise Refusal(
            503,
            "the artifact store could not be read; retry",
            "artifact_store_unavailable",
            {"Retry-After": str(STORE_RETRY_S)},
        ) from None
    return LargeChunkFileResponse(
        path, media_type="application/octet-stream", headers=headers, filename=filename
    )


class LargeChunkFileResponse(FileResponse):
    """A file sent 1 MiB at a time (Starlette's 64 KiB means a thread hop per 64 KiB: a 47 MB
    library took ~700 of them); the memory a download holds stays one chunk."""

    chunk_size = 1 << 20
