"""Depthwise 3x3 Conv2d (groups equal to channels) followed by ReLU6.

One filter per channel: little arithmetic per byte, so it is bound by memory, not compute.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
channels = 32
height = 56
width = 56


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)

    def forward(self, x):
        return F.relu6(self.conv(x))


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
