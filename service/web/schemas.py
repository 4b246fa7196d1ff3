"""What a request may carry: the API's request bodies and its path and query parameter types,
each with the limits that make bad input a 422 (the JSON it answers, its shapes and
builders, is `service.app.responses`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Query
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)

from tuning.untrusted.user_tasks import MAX_TASK_JSON_BYTES, MAX_UPLOADED_TASKS
from tuning.untrusted.user_tir import MAX_SOURCE_BYTES

# Path and query ids: the store's id columns are INTEGER, 32-bit on PostgreSQL (which refuses
# to compare one with 2^31: a 500) and 64-bit on SQLite (which cannot bind 2^63), so an id
# outside 1..2^31-1 is a 422, never a 500.
MAX_ROW_ID = 2**31 - 1
RowId = Annotated[int, Field(ge=1, le=MAX_ROW_ID, description="a row id, 1 to 2^31-1")]


# A target in a request body: "host", a stored target's key or label, or a TVM target as a JSON
# object (whose kind is one tunehub tunes). What LLVM knows (CPU and feature names) is checked
# by the service (a 422 at the attribute), not by the schema.
TARGET_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "minLength": 1, "maxLength": 4096},
        {
            "type": "object",
            "required": ["kind"],
            "properties": {"kind": {"type": "string", "enum": ["llvm", "cuda"]}},
        },
    ]
}
TargetSpec = Annotated[
    Annotated[str, StringConstraints(min_length=1, max_length=4096)] | dict[str, Any],
    WithJsonSchema(TARGET_SCHEMA),
]


class OperatorSpec(BaseModel):
    """A catalog operator and its parameters."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=64)
    params: dict[str, Any] = Field(default_factory=dict)


class TirSpec(BaseModel):
    """A raw TIR function: TVMScript text or TVM JSON (`tvm.ir.save_json`)."""

    model_config = ConfigDict(extra="forbid")
    format: Literal["tvmscript", "json"]
    source: str = Field(min_length=1, max_length=MAX_SOURCE_BYTES)


# A small raw TIR job body's source (the OpenAPI example of POST /jobs).
TIR_EXAMPLE = """@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.sblock("B"):
                v_i = T.axis.spatial(16, i)
                B[v_i] = A[v_i] * T.float32(2.0)
"""


JOB_EXAMPLES = [
    {
        "operator": {"name": "matmul", "params": {"M": 64, "N": 64, "K": 64}},
        "target": "host",
        "trials": 16,
    },
    {"tir": {"format": "tvmscript", "source": TIR_EXAMPLE}, "trials": 16},
]


def _job_schema(schema: dict[str, Any]) -> None:
    """``JobCreate``'s schema: ``operator`` and ``tir`` are objects (never null), exactly one
    of them is given, and its examples."""
    for name in ("operator", "tir"):
        field = schema["properties"][name]
        field.update(next(s for s in field.pop("anyOf") if s.get("type") != "null"))
        field.pop("default", None)
    schema["oneOf"] = [{"required": ["operator"]}, {"required": ["tir"]}]
    schema["examples"] = JOB_EXAMPLES


class JobCreate(BaseModel):
    """Body of ``POST /api/v1/jobs``: a catalog ``operator`` or a raw ``tir`` function."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_job_schema)
    operator: OperatorSpec | None = None
    tir: TirSpec | None = None
    target: TargetSpec = Field(
        default="host", description='"host", a stored key or label, or a TVM target as JSON'
    )
    trials: Annotated[int, Field(strict=True, ge=1)]
    submitted_by: str | None = Field(
        default=None,
        max_length=255,
        description="ignored (kept for old clients): a job's submitter is the caller's identity",
    )
    priority: Annotated[int, Field(strict=True, ge=-100, le=100)] = Field(
        default=0, description="higher runs first on its target; equal priorities share fairly"
    )
    transfer_cost_model: StrictBool = Field(
        default=True,
        description="start from the target's cost model trained on all its stored records",
    )
    space: Literal["auto", "plain", "packed"] = Field(
        default="auto",
        description=(
            "search space: 'plain' (MetaSchedule's default), 'packed' (CPU: weights in a packed "
            "layout chosen by the search, register tiles one vector wide), 'auto' = packed where "
            "the operator has a weight and the target is a CPU, else plain"
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _no_null_workload(cls, data: Any) -> Any:
        for name in ("operator", "tir"):
            if isinstance(data, dict) and name in data and data[name] is None:
                raise ValueError(f"'{name}' is an object: leave it out rather than send null")
        return data

    @model_validator(mode="after")
    def _one_workload(self) -> JobCreate:
        if (self.operator is None) == (self.tir is None):
            raise ValueError("give exactly one of 'operator' (a catalog name) and 'tir'")
        return self


# Printable ASCII: names, "host" and JSON targets are; a control character is refused anyway.
_TARGET_QUERY = dict(
    min_length=1,
    max_length=4096,
    pattern=r"^[\x20-\x7e]+$",
    description="key, label, 'host' or JSON",
)
TargetQuery = Annotated[str, Query(**_TARGET_QUERY)]  # a target named in a query
OptionalTargetQuery = Annotated[str | None, Query(**_TARGET_QUERY)]

MAX_LOOKUP_WORKLOADS = 1000  # workload hashes per lookup: a whole model's tasks, many times over
SHASH_PATTERN = r"^[0-9]{1,20}$"  # a structural hash (uint64) as decimal text
ShashText = Annotated[
    str, Field(pattern=SHASH_PATTERN, description="a structural hash, as decimal text")
]


class LookupBody(BaseModel):
    """Body of ``POST /api/v1/lookup``: the verified bests of many workloads on one target."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"target": "host", "workloads": ["1234567890"]}]},
    )
    target: TargetSpec = Field(
        default="host", description='"host", a TVM target as a JSON object, or a stored key/label'
    )
    workloads: list[ShashText] = Field(max_length=MAX_LOOKUP_WORKLOADS)
    allow_neighbour: StrictBool = Field(
        default=False,
        description="answer a known workload without a verified best with its nearest tuned "
        "neighbour's schedule, refitted and marked unverified (a job then verifies and tunes it)",
    )


class TaskSourceSpec(BaseModel):
    """One task a build misses: the fused function's name and its module as TVM JSON."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=256, pattern=r"^[\x20-\x7e]+$")
    module: str = Field(
        min_length=1,
        max_length=MAX_TASK_JSON_BYTES,
        description="the one-function module MetaSchedule queries (``main``), as "
        "``tvm.ir.save_json`` writes it; parsed only in an isolated child",
    )


class TaskUploadBody(BaseModel):
    """Body of ``POST /api/v1/tasks``: the tasks a build found no schedule for, to tune."""

    model_config = ConfigDict(extra="forbid")
    target: TargetSpec = Field(
        default="host", description='"host", a TVM target as a JSON object, or a stored key/label'
    )
    tasks: list[TaskSourceSpec] = Field(min_length=1, max_length=MAX_UPLOADED_TASKS)


class ImportBody(BaseModel):
    """Body of ``POST /api/v1/import``: a MetaSchedule JSON database (both files' text, keyed by
    their file names, `tuning.publish.interchange.WORKLOAD_FILE` and ``RECORD_FILE``) measured on
    ``target``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    target: TargetSpec = Field(description='"host", a label/key, or a JSON target')
    workloads: str = Field(alias="database_workload.json", max_length=64 * 2**20)
    records: str = Field(alias="database_tuning_record.json", max_length=256 * 2**20)


MAX_MODEL_INPUTS = 16
# A small model (the OpenAPI example of POST /models; an ONNX file goes as its bytes in base64).
RELAX_EXAMPLE = """@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 16), dtype="float32")) -> R.Tensor((1, 16), dtype="float32"):
        with R.dataflow():
            y = R.nn.relu(x)
            R.output(y)
        return y
"""


class ModelInputSpec(BaseModel):
    """One input of an uploaded model: its graph name, static shape and dtype."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=128)
    shape: list[Annotated[int, Field(strict=True, ge=1, le=2**20)]] = Field(max_length=8)
    dtype: Literal["float32", "float16", "int8", "uint8", "int32", "int64", "bool"] = "float32"


class ModelCreate(BaseModel):
    """Body of ``POST /api/v1/models``: a whole model to tune and compile for one target."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "relu",
                    "format": "relax",
                    "source": RELAX_EXAMPLE,
                    "inputs": [{"name": "x", "shape": [1, 16], "dtype": "float32"}],
                    "target": "host",
                    "trials": 4,
                }
            ]
        },
    )
    name: str = Field(default="model", min_length=1, max_length=128)
    format: Literal["onnx", "relax"] = Field(
        description="'onnx': an ONNX file, base64 (no external data); 'relax': a Relax IRModule "
        "as TVMScript text"
    )
    source: str = Field(min_length=1)
    inputs: list[ModelInputSpec] = Field(min_length=1, max_length=MAX_MODEL_INPUTS)
    target: TargetSpec = Field(
        default="host", description='"host", a stored key or label, or a TVM target as JSON'
    )
    trials: Annotated[int, Field(strict=True, ge=1)] = Field(
        description="the model's total budget, shared by its tasks (docs/model-jobs.md)"
    )
    layout: Literal["plain", "blocked"] = Field(
        default="plain",
        description="'plain': convolutions as the model writes them (NCHW); 'blocked': in a "
        "blocked channel layout kept between layers (NCHW16c on AVX-512), weights reordered at "
        "compile. Its tasks are other workloads: a build fetches them with the same layout",
    )
    precision: Literal["float32", "bfloat16"] = Field(
        default="float32",
        description="'float32': as the model is written; 'bfloat16': its matmuls and "
        "convolutions read bf16 operands (weights stored in bf16) and sum in float32, the rest "
        "float32, checked against float32 when compiled (cosine >= 0.999, same top class). "
        "Needs a target with AVX512-BF16 (a 422 names it); its tasks are other workloads: a "
        "build fetches them with the same precision",
    )
