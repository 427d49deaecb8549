"""Conv2d, a per-channel bias and scale, sigmoid, then GroupNorm with 8 groups.

The norm's rows regroup the activation's channels, so it cannot fuse through the reshape.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3)
        self.bias = nn.Parameter(torch.randn(16, 1, 1))
        self.scale = nn.Parameter(torch.randn(16, 1, 1))
        self.gn = nn.GroupNorm(8, 16)

    def forward(self, x):
        x = torch.sigmoid((self.conv(x) + self.bias) * self.scale)
        return self.gn(x)


def get_inputs():
    return [torch.randn(16, 3, 64, 64)]


def get_init_inputs():
    return []
