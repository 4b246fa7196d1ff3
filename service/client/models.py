"""Whole-model jobs from the light client: submit a model file, follow it, download the
compiled model (``/api/v1/models``)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

from service.client.http import TunehubClient, poll_until_final


def model_format(path: Path) -> str:
    """ "onnx" for a ``.onnx`` file, "relax" for TVMScript (``.py``); ValueError otherwise."""
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        return "onnx"
    if suffix == ".py":
        return "relax"
    raise ValueError(f"{path}: expected an .onnx file or a Relax module as TVMScript (.py)")


def submit_model(
    client: TunehubClient,
    path: str | Path,
    inputs: list[dict[str, Any]],
    trials: int,
    target: str | dict[str, Any] = "host",
    name: str | None = None,
    layout: str = "plain",
    precision: str = "float32",
) -> dict[str, Any]:
    """Submit the model in ``path`` (``inputs``: ``{"name", "shape", "dtype"}`` each) with a
    total budget of ``trials``, its convolutions tuned in ``layout`` ("plain" or "blocked")
    and its matmuls and convolutions in ``precision`` ("float32" or "bfloat16": bf16 operands,
    float32 sums; build it with the same); the model as the server recorded it (its tasks'
    jobs queued)."""
    path = Path(path)
    fmt = model_format(path)
    data = path.read_bytes()
    if fmt == "onnx":
        source = base64.b64encode(data).decode()
    else:
        try:
            source = data.decode()
        except UnicodeDecodeError:
            raise ValueError(f"{path}: a Relax module is UTF-8 TVMScript text") from None
    body = {
        "name": name or path.stem,
        "format": fmt,
        "source": source,
        "inputs": inputs,
        "target": target,
        "trials": trials,
        "layout": layout,
        "precision": precision,
    }
    # The server parses the model in two isolated children before it answers (up to 180 s
    # each): a shorter timeout would report a model that is being created as a failure.
    return client._object(client.http.post("/models", json=body, timeout=600))


def get_model(client: TunehubClient, model_id: int) -> dict[str, Any]:
    """One model with its tasks' progress."""
    return client._object(client.http.get(f"/models/{model_id}"))


def cancel_model(client: TunehubClient, model_id: int) -> dict[str, Any]:
    """Cancel a model (its unfinished task jobs too)."""
    return client._object(client.http.post(f"/models/{model_id}/cancel"))


def wait_model(
    client: TunehubClient,
    model_id: int,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    poll_s: float = 1.0,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """Poll a model until it is final; ``on_progress`` sees every poll. Returns the model."""
    return poll_until_final(
        lambda: get_model(client, model_id), f"model {model_id}", on_progress, poll_s, timeout_s
    )


def download_model(client: TunehubClient, model_id: int, dest: str | Path) -> str:
    """Download a compiled model to ``dest`` and check its sha256 (returned)."""
    return client.download(f"/models/{model_id}/artifact", dest, f"model {model_id}")
