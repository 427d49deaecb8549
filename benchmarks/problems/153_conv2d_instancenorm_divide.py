"""A 3x3 Conv2d, InstanceNorm2d without affine weights, then a division by a constant."""

import torch
import torch.nn as nn

batch_size = 8


class Model(nn.Module):
    def __init__(self, channels=16, out=32, divisor=2.0):
        super().__init__()
        self.conv = nn.Conv2d(channels, out, 3)
        self.norm = nn.InstanceNorm2d(out)
        self.divisor = divisor

    def forward(self, x):
        return self.norm(self.conv(x)) / self.divisor


def get_inputs():
    return [torch.randn(batch_size, 16, 64, 64)]


def get_init_inputs():
    return [16, 32, 2.0]
