"""Conv2d, a constant subtracted, HardSwish, a 2x2 max pool and Mish: a fused chain."""

import torch
import torch.nn as nn

batch_size = 8


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, subtract, pool):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.subtract = subtract
        self.pool = nn.MaxPool2d(pool)

    def forward(self, x):
        x = self.conv(x) - self.subtract
        x = nn.functional.hardswish(x)
        x = self.pool(x)
        return nn.functional.mish(x)


def get_inputs():
    return [torch.randn(batch_size, 3, 64, 64)]


def get_init_inputs():
    return [3, 32, 3, 0.5, 2]
