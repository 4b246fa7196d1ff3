"""The models `bench/model.py` benchmarks, as a user has them: PyTorch modules (written out
here, torchvision does not import beside the torch wheel this project pins), random weights
from a fixed seed, in eval mode, batch 1; exported to ONNX with ``torch.onnx.export`` for
ONNX Runtime and tunehub, run as modules for PyTorch eager and ``torch.compile``.

    resnet18     torchvision's ResNet-18 (BasicBlocks with BatchNorm), 1x3x224x224
    mobilenetv2  torchvision's MobileNet-V2 (width 1.0, ReLU6, BatchNorm), 1x3x224x224
    bert         a BERT-base encoder layer (post-norm, exact GELU), 1x128x768, 12 heads
    cnn          a small CNN (two conv-BN-ReLU stages, pool, dense), 1x3x32x32
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from typing import Any

import onnx
import torch
from torch import nn

# (expansion t, output channels c, repeats n, first stride s): MobileNet-V2's Table 2.
MOBILENET_BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                    (6, 160, 3, 2), (6, 320, 1, 1)]  # fmt: skip


def conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    """A bias-free k x k convolution (padding k // 2) and its BatchNorm."""
    conv = nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False)
    return [conv, nn.BatchNorm2d(cout)]


class BasicBlock(nn.Module):
    """ResNet's two 3x3 convs with a residual (a 1x1 stride-2 projection where shapes change)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(*conv_bn(cin, cout, 3, stride), nn.ReLU(inplace=True),
                                  *conv_bn(cout, cout, 3))  # fmt: skip
        self.skip = (nn.Sequential(*conv_bn(cin, cout, 1, stride))
                     if stride != 1 or cin != cout else nn.Identity())  # fmt: skip
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + self.skip(x))


class ResNet18(nn.Module):
    """torchvision.models.resnet18's layers, 1000 classes."""

    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = [*conv_bn(3, 64, 7, 2), nn.ReLU(inplace=True),
                                   nn.MaxPool2d(3, 2, 1)]  # fmt: skip
        cin = 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(512, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


class InvertedResidual(nn.Module):
    """MobileNet-V2's block: 1x1 expansion, 3x3 depthwise, 1x1 linear projection (+ x)."""

    def __init__(self, cin: int, cout: int, stride: int, t: int) -> None:
        super().__init__()
        hidden = cin * t
        layers = [*conv_bn(cin, hidden, 1), nn.ReLU6(inplace=True)] if t != 1 else []
        layers += [*conv_bn(hidden, hidden, 3, stride, hidden), nn.ReLU6(inplace=True),
                   *conv_bn(hidden, cout, 1)]  # fmt: skip
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    """torchvision.models.mobilenet_v2's layers (width 1.0), 1000 classes."""

    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = [*conv_bn(3, 32, 3, 2), nn.ReLU6(inplace=True)]
        cin = 32
        for t, c, repeats, first_stride in MOBILENET_BLOCKS:
            for i in range(repeats):
                layers.append(InvertedResidual(cin, c, first_stride if i == 0 else 1, t))
                cin = c
        layers += [*conv_bn(cin, 1280, 1), nn.ReLU6(inplace=True)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(pooled, 1))


class EncoderLayer(nn.Module):
    """A BERT encoder layer as Hugging Face writes it: separate Q, K and V projections,
    scaled dot-product attention, output projection, residual + LayerNorm, GELU FFN, residual
    + LayerNorm."""

    def __init__(self, dim: int = 768, heads: int = 12, ffn: int = 3072) -> None:
        super().__init__()
        self.heads, self.head = heads, dim // heads
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.out, self.norm1 = nn.Linear(dim, dim), nn.LayerNorm(dim, eps=1e-12)
        self.ffn_in, self.ffn_out = nn.Linear(dim, ffn), nn.Linear(ffn, dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(batch, seq, self.heads, self.head).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head)
        context = torch.matmul(scores.softmax(-1), v).transpose(1, 2).reshape(batch, seq, dim)
        h = self.norm1(x + self.out(context))
        return self.norm2(h + self.ffn_out(nn.functional.gelu(self.ffn_in(h))))


class SmallCNN(nn.Module):
    """Two conv-BN-ReLU stages with a pool between, global pool, dense to 10 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(*conv_bn(3, 16, 3), nn.ReLU(), nn.MaxPool2d(2),
                                      *conv_bn(16, 32, 3), nn.ReLU())  # fmt: skip
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


MODULES: dict[str, tuple[Callable[[], nn.Module], Callable[[int], list[int]], int]] = {
    # name: (module, input shape at a size, the benchmark's size)
    "resnet18": (ResNet18, lambda size: [1, 3, size, size], 224),
    "mobilenetv2": (MobileNetV2, lambda size: [1, 3, size, size], 224),
    "bert": (EncoderLayer, lambda seq: [1, seq, 768], 128),
    "cnn": (SmallCNN, lambda size: [1, 3, size, size], 32),
}


def make_module(name: str, seed: int = 0) -> nn.Module:
    """Model ``name`` with weights drawn from ``seed`` (BatchNorm statistics included, so
    that folding them is not a no-op), in eval mode."""
    torch.manual_seed(seed)
    module = MODULES[name][0]()
    for layer in module.modules():
        if isinstance(layer, nn.BatchNorm2d):
            layer.running_mean.uniform_(-0.1, 0.1)
            layer.running_var.uniform_(0.5, 1.5)
            nn.init.uniform_(layer.weight, 0.5, 1.5)
            nn.init.uniform_(layer.bias, -0.1, 0.1)
    return module.eval()


def input_shape(name: str, size: int | None = None) -> list[int]:
    """The input shape of model ``name`` at ``size`` (default: the benchmark's)."""
    _, shape, default = MODULES[name]
    return shape(size or default)


def export_onnx(module: nn.Module, shape: list[int]) -> Any:
    """``module`` exported by ``torch.onnx.export`` (the TorchScript exporter, constants
    folded, opset 17), input "x", output "y": what a user hands to ONNX Runtime or tunehub."""
    buffer = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module, (torch.zeros(shape),), buffer, input_names=["x"],
                          output_names=["y"], opset_version=17, do_constant_folding=True,
                          dynamo=False)  # fmt: skip
    return onnx.load_from_string(buffer.getvalue())
