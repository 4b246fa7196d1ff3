"""The program a jail runs for user input: one request, one framed answer, then exit.

Runs unprivileged, without network, in a read-only root (see `tuning.jail.enter`). The
answer goes to a private copy of stdout; stdout itself is pointed at stderr first, so nothing
the untrusted input makes Python or TVM print can be mistaken for the answer. Requests are the
functions of `tuning.untrusted.requests`; a request's exception is the submitter's to read and
becomes ``{"ok": false, "error": ...}``. The parent's side is `tuning.untrusted.ask`.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

FRAME = b"TUNEHUB-ANSWER "


def _reason(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    found = next((line for line in lines if line.startswith("error:")), None)
    return f"{type(err).__name__}: {found or (lines[-1] if lines else '')}"[:1000]


def main() -> None:
    answer_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    request = json.loads(sys.stdin.read())
    try:
        # Imported once stdout points at stderr: nothing it prints can pass for the answer.
        from tuning.untrusted import requests

        handler = requests.REQUESTS[request.pop("request")]
        answer: dict[str, Any] = {"ok": True, **handler(**request)}
    except requests.Refused as err:
        answer = {"ok": False, "error": str(err)[:1000]}
    except Exception as err:  # noqa: BLE001 - any failure on the input is the submitter's
        answer = {"ok": False, "error": _reason(err)}
    body = json.dumps(answer).encode()
    os.write(answer_fd, FRAME + str(len(body)).encode() + b"\n")
    view = memoryview(body)
    while view:
        view = view[os.write(answer_fd, view) :]
    os._exit(0)  # no atexit handlers, no TVM teardown: the answer is out
