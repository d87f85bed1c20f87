"""Programs for the `opwire view` tests and benchmark beyond the corpus.

`Hops`: torch.cond, map and while_loop in one program. `ResNet`: 20 batch norms (multi-output nodes) and a
dynamic batch. `Stack(n)`: n transformer encoder layers, module groups big enough to start collapsed (the
benchmark's programs are `stack_program(28)`, `(137)` and `(274)`: about 2,000, 10,000 and 20,000 nodes).
Benchmarks put tests/ on sys.path and import it from the support package, as they do `corpus`.
"""

from __future__ import annotations

import warnings

import torch
from torch._export.serde.serialize import serialize
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.while_loop import while_loop

__all__ = ["Hops", "ResNet", "Stack", "hops_program", "resnet_export", "resnet_program", "stack_program"]


class Hops(torch.nn.Module):
    """torch.cond, map and while_loop in one program, a parameter used inside a branch."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mapped = hop_map(lambda row, w: torch.sin(row) * w, xs, x.sum())
        y = torch.cond(x.sum() > 0, lambda a: self.lin(a).relu(), lambda a: a.cos(), (x,))
        _, acc = while_loop(lambda i, acc: i < 3, lambda i, acc: (i + 1, acc * 2), (torch.tensor(0), y))
        return mapped, acc


def hops_program() -> bytes:
    """torch's JSON of the exported `Hops` program (cond, map_impl, while_loop)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about how it serializes an empty list
        ep = torch.export.export(Hops(), (torch.randn(3, 4), torch.randn(2, 4)))
        return serialize(ep).exported_program


class Stack(torch.nn.Module):
    """`n` transformer encoder layers: module groups big enough to start collapsed."""

    def __init__(self, n: int, d: int = 16) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(d, 2, dim_feedforward=32, dropout=0.0, batch_first=True) for _ in range(n)
        )
        self.head = torch.nn.Linear(d, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def stack_program(n: int, decompose: bool = True) -> bytes:
    """torch's JSON of an exported `Stack(n)` (decomposed to core ATen unless told otherwise)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's own deprecation noise while exporting
        ep = torch.export.export(Stack(n).eval(), (torch.randn(2, 5, 16),))
        if decompose:
            ep = ep.run_decompositions()
        return serialize(ep).exported_program


class _Block(torch.nn.Module):
    """A ResNet basic block (a 1x1 convolution and batch norm on the shortcut when the shape changes)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        nn = torch.nn
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x if self.downsample is None else self.downsample(x)
        return self.relu(self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x))))) + shortcut)


class ResNet(torch.nn.Module):
    """A narrow ResNet-18 (20 batch norms, nested Sequential groups), the shape of torchvision's.

    At this size the page once opened the cheap module groups first and left the batch norms' (four weights
    each) collapsed: 13 of 70 nodes were not on the first page.
    """

    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.conv1 = nn.Conv2d(3, 8, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = nn.Sequential(_Block(8, 8, 1), _Block(8, 8, 1))
        self.layer2 = nn.Sequential(_Block(8, 16, 2), _Block(16, 16, 1))
        self.layer3 = nn.Sequential(_Block(16, 32, 2), _Block(32, 32, 1))
        self.layer4 = nn.Sequential(_Block(32, 32, 2), _Block(32, 32, 1))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet_export(decompose: bool) -> torch.export.ExportedProgram:
    """`ResNet` in eval mode exported with a dynamic batch (torch names its size `s<N>`), decomposed or not."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        batch = torch.export.Dim("batch", min=1, max=64)
        ep = torch.export.export(ResNet().eval(), (torch.randn(2, 3, 32, 32),), dynamic_shapes=({0: batch},))
        return ep.run_decompositions() if decompose else ep


def resnet_program(decompose: bool) -> bytes:
    """torch's JSON of `resnet_export(decompose)`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return serialize(resnet_export(decompose)).exported_program
