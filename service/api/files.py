"""Serving a stored file (a schedule's library, a compiled model) from the artifact directory:
content-addressed, so its sha256 is its ``ETag`` and ``If-None-Match`` gets a 304."""

from __future__ import annotations

from pathlib import Path

from fastapi import Request
from fastapi.responses import FileResponse, Response

from schedules_db.values import Artifact
from service.errors import not_found


def artifact_response(
    request: Request, artifact_dir: Path, artifact: Artifact, filename: str
) -> Response:
    """The artifact's file as ``filename`` (``ETag`` and ``X-Content-SHA256``: its sha256),
    a 304 when the request already holds it, a 404 when the file is gone."""
    headers = {"ETag": f'"{artifact.sha256}"', "X-Content-SHA256": artifact.sha256}
    if request.headers.get("if-none-match") == headers["ETag"]:
        return Response(status_code=304, headers=headers)
    path = artifact_dir / artifact.path
    if not path.is_file():
        raise not_found("artifact file", artifact.sha256)
    return FileResponse(
        path, media_type="application/octet-stream", headers=headers, filename=filename
    )
