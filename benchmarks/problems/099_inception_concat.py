"""An inception block: 1x1, 3x3 and 5x5 conv branches and a pooled branch, concatenated."""

import torch
from torch import nn

batch_size = 2


class Model(nn.Module):
    def __init__(self, channels: int = 32) -> None:
        super().__init__()
        self.b1 = nn.Conv2d(channels, 16, 1)
        self.b3 = nn.Sequential(
            nn.Conv2d(channels, 16, 1), nn.ReLU(), nn.Conv2d(16, 24, 3, padding=1)
        )
        self.b5 = nn.Sequential(nn.Conv2d(channels, 8, 1), nn.ReLU(), nn.Conv2d(8, 8, 5, padding=2))
        self.bp = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1), nn.Conv2d(channels, 8, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], dim=1))


def get_inputs():
    return [torch.randn(batch_size, 32, 28, 28)]


def get_init_inputs():
    return []
