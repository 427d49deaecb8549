"""A squeeze-and-excitation block after a depthwise conv, as in EfficientNet and MobileNetV3."""

import torch
from torch import nn

batch_size = 4


class Model(nn.Module):
    def __init__(self, channels: int = 48, reduced: int = 12) -> None:
        super().__init__()
        self.depthwise = nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False)
        self.norm = nn.BatchNorm2d(channels)
        self.reduce = nn.Conv2d(channels, reduced, 1)
        self.expand = nn.Conv2d(reduced, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.silu(self.norm(self.depthwise(x)))
        scale = torch.sigmoid(
            self.expand(nn.functional.silu(self.reduce(y.mean((2, 3), keepdim=True))))
        )
        return y * scale


def get_inputs():
    return [torch.randn(batch_size, 48, 32, 32)]


def get_init_inputs():
    return []
