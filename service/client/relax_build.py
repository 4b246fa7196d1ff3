"""`build`: a whole Relax model compiled with tunehub's tuned schedules, in one call.

It runs exactly the pipeline model jobs extract their tasks with
(`tuning.models.pipeline.tuning_pipeline`: the zero pipeline under the target, weights
layout-free on CPU), so every task hashes as the service stored it; looks every task up in one
request (`TunehubDatabase.prefetch`); and compiles with the verified schedules applied and the
packed weights folded into constants (`tuning.models.pipeline.compile_with`). A task the
service has no verified best for is built as written. Nothing is sent back.
"""

from __future__ import annotations

from typing import Any

import tvm

from service.client.http import TunehubClient
from service.client.tvm_database import TunehubDatabase
from tuning.hardware.bf16 import request_amx
from tuning.models.pipeline import compile_with, tuning_pipeline
from tuning.models.precision import FLOAT32


def build(
    mod: Any,
    target: Any,
    *,
    server: str | None = None,
    client: TunehubClient | None = None,
    params: dict[str, Any] | None = None,
    allow_neighbour: bool = False,
    tune_missing: bool = False,
    fast_math: bool = True,
    layout: str = "plain",
    precision: str = FLOAT32,
) -> Any:
    """The Relax executable of ``mod`` (its ``main``; ``params`` bound as constants first)
    for ``target`` (a `tvm.target.Target` or its JSON), with the schedules tunehub tuned for
    that target. Talks to ``client``, or to ``server`` (default ``$TUNEHUB_URL``; token from
    ``$TUNEHUB_TOKEN``): two requests whatever the model's size (the target's key, then one
    lookup of every task). ``allow_neighbour`` and ``tune_missing``: as `TunehubDatabase`'s
    (with ``tune_missing``, two more requests when tasks are missing: they are sent, then
    looked up again). ``fast_math``: exp, erf, tanh and softmax as the vectorising polynomials
    model jobs tune (`tuning.models.pipeline.tuning_pipeline`); false builds them exactly, and
    the schedules tuned for those exact functions apply. ``layout``: the layout the model's
    convolutions were tuned in (``"blocked"``: NCHW[x]c kept between layers, as a model job
    submitted with that layout tunes them). ``precision``: the precision they were tuned in
    (``"bfloat16"``: matmuls and convolutions on bf16 operands, float32 sums; the target needs
    AVX512-BF16 for the tuned kernels, and AMX-BF16 for those on AMX tiles: this process asks
    Linux for the tile state, `tuning.hardware.bf16.request_amx`, as it builds)."""
    target = target if isinstance(target, tvm.target.Target) else tvm.target.Target(target)
    if params:
        mod = tvm.relax.transform.BindParams("main", params)(mod)
    fused = tuning_pipeline(mod, target, fast_math, layout=layout, precision=precision)
    own = client is None
    client = client or TunehubClient(server)
    try:
        database = TunehubDatabase(
            client, target, allow_neighbour=allow_neighbour, tune_missing=tune_missing
        )
        database.prefetch(fused)
        if precision != FLOAT32:
            request_amx()  # the executable runs here, and its kernels may be on AMX tiles
        return compile_with(fused, target, database)
    finally:
        if own:
            client.close()
