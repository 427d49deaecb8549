"""A grouped 3x3 convolution (4 groups, neither dense nor depthwise) and a softplus."""

import torch
import torch.nn as nn

batch_size = 4


class Model(nn.Module):
    def __init__(self, channels, groups):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=groups)

    def forward(self, x):
        return nn.functional.softplus(self.conv(x))


def get_inputs():
    return [torch.randn(batch_size, 64, 56, 56)]


def get_init_inputs():
    return [64, 4]
