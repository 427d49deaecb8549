"""ReLU6 (min(max(x, 0), 6)) of an input plus a per-channel bias on a feature map.

A broadcast add feeding a clip to a fixed range, as in MobileNet blocks.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
channels = 64
height = 32
width = 32


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.bias = nn.Parameter(torch.rand(channels, 1, 1) * 4.0)

    def forward(self, x):
        return F.relu6(4.0 * x + self.bias)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
