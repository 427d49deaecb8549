"""MobileNetV2's inverted residual: expand 1x1, depthwise 3x3, project 1x1, ReLU6, residual."""

import torch
from torch import nn

batch_size = 4


class Model(nn.Module):
    def __init__(self, channels: int = 32, expansion: int = 6) -> None:
        super().__init__()
        hidden = channels * expansion
        self.block = nn.Sequential(
            nn.Conv2d(channels, hidden, 1, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(),
            nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(),
            nn.Conv2d(hidden, channels, 1, bias=False),
            nn.BatchNorm2d(channels),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


def get_inputs():
    return [torch.randn(batch_size, 32, 28, 28)]


def get_init_inputs():
    return []
