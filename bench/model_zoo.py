"""The models `bench/model.py` benchmarks, built by hand as ONNX files with random weights,
batch 1, by name: (builder, input shape)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "examples", ROOT / "bench"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from cnn import small_cnn  # noqa: E402
from mobilenet import mobilenet_v2  # noqa: E402
from transformer_block import encoder_layer  # noqa: E402

from tests.tuning.model_cases import resnet18_like  # noqa: E402

MODELS: dict[str, tuple[Callable[[], Any], list[int]]] = {
    "cnn": (lambda: small_cnn(32), [1, 3, 32, 32]),
    "resnet18": (lambda: resnet18_like(size=224), [1, 3, 224, 224]),
    "bert": (lambda: encoder_layer(seq=128, dim=768, heads=12, ffn=3072), [1, 128, 768]),
    "mobilenetv2": (lambda: mobilenet_v2(224), [1, 3, 224, 224]),
}
