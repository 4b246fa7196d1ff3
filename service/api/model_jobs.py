"""``/api/v1/models``: submit whole models, follow their tasks and compile, fetch the result."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from service.api.deps import BlobsDep, LimitsDep, QueueDep, ServicesDep, SettingsDep, StoreDep
from service.api.files import STORE_FAILURES, artifact_response
from service.app.responses.model_jobs import ModelOut
from service.app.rows import present
from service.app.usecases.cancel import cancel_model as cancel
from service.app.usecases.create_model import ModelRequest
from service.app.usecases.create_model import create_model as create
from service.app.views.models import model_view
from service.web.auth import AnyReader, CodeSubmitter, Submitter
from service.web.errors import not_found, responses
from service.web.refusals import ISOLATION_RESPONSES, Refusal, refusal_schema
from service.web.schemas import ModelCreate, RowId
from service.web.strict_input import StrictRoute
from tuning.models.inputs import ModelInput

router = APIRouter(prefix="/models", tags=["models"], route_class=StrictRoute)

ARTIFACT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the compiled model: an exported Relax VM library (`main` takes the "
        "model's inputs; weights are inside, packed at compile time)",
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
        "headers": {
            "ETag": {"description": "the sha256, quoted", "schema": {"type": "string"}},
            "X-Content-SHA256": {"description": "the sha256", "schema": {"type": "string"}},
        },
    },
    409: refusal_schema("the model exists but is not compiled (yet): type not_compiled"),
    **STORE_FAILURES,
    **responses(304, 404),
}


@router.post("", status_code=201, response_model=ModelOut, responses=ISOLATION_RESPONSES)
def create_model(
    body: ModelCreate,
    who: CodeSubmitter,
    store: StoreDep,
    queue: QueueDep,
    settings: SettingsDep,
    blobs: BlobsDep,
    limits: LimitsDep,
) -> ModelOut:
    """Parse a model in isolation, store its tasks and tune each through an ordinary job with
    its share of ``trials``; a worker of the target compiles the whole model once every task
    job is final. Needs ``submit-code`` (the file is user code). Nothing is written when any
    field is invalid or the parser refuses the model (422 naming ``source`` or ``inputs``)."""
    return model_view(
        store, create(store, queue, settings, blobs, limits, who, _model_request(body))
    )


def _model_request(body: ModelCreate) -> ModelRequest:
    """The use case's input: the body's values, its inputs as `tuning.models.inputs.ModelInput`."""
    return ModelRequest(
        name=body.name,
        format=body.format,
        source=body.source,
        inputs=[ModelInput(i.name, tuple(i.shape), i.dtype) for i in body.inputs],
        target=body.target,
        trials=body.trials,
        layout=body.layout,
        precision=body.precision,
    )


@router.get("", response_model=list[ModelOut])
def list_models(
    who: AnyReader, store: StoreDep, limit: int = Query(default=100, ge=1, le=1000)
) -> list[ModelOut]:
    """Models, newest first (without their task lists)."""
    return [model_view(store, m, with_tasks=False) for m in store.models.list_models(limit)]


@router.get("/{model_id}", response_model=ModelOut, responses=responses(404))
def get_model(model_id: RowId, who: AnyReader, store: StoreDep) -> ModelOut:
    """One model with its tasks, each with its job's progress."""
    model = store.models.get(model_id)
    if model is None:
        raise not_found("model", model_id)
    return model_view(store, model)


@router.post("/{model_id}/cancel", response_model=ModelOut, responses=responses(404))
def cancel_model(model_id: RowId, who: Submitter, store: StoreDep, queue: QueueDep) -> ModelOut:
    """Cancel a model: its unfinished task jobs, and the model unless it is compiled."""
    return model_view(store, cancel(store, queue, who, model_id))


@router.get(
    "/{model_id}/artifact",
    response_class=Response,
    response_model=None,
    responses=ARTIFACT_RESPONSES,
)
async def get_model_artifact(
    model_id: RowId, request: Request, who: AnyReader, services: ServicesDep
) -> Response:
    """The compiled model; ``ETag`` answers ``If-None-Match``. 404 for no such model, 409
    ``not_compiled`` (with its ``state``) for one that has not succeeded (yet)."""
    model = await run_in_threadpool(services.store.models.get, model_id)
    if model is None:
        raise not_found("model", model_id)
    if model.artifact_id is None:
        raise Refusal(
            409,
            f"model {model_id} is {model.state}: its compiled library exists once it succeeded",
            "not_compiled",
            state=model.state,
        )
    stored = await run_in_threadpool(services.store.schedules.get_artifact, model.artifact_id)
    artifact = present(stored, "artifact")
    precision = "-bf16" if model.precision == "bfloat16" else ""  # never taken for float32
    name = f"tunehub-model{model_id}{precision}-{artifact.sha256[:12]}.so"
    return await artifact_response(request, services.artifacts, artifact, name)
