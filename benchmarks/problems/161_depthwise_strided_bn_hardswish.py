"""A MobileNet-V3 downsampling block: a depthwise 5x5 Conv2d of stride 2 (groups equal to
channels), BatchNorm and Hardswish.

Each output reads every other input along a row: no vector load takes a tap's row as it
lies, so the row is deinterleaved into its two phases first.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
channels = 96
height = 28
width = 28


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 5, stride=2, padding=2, groups=channels)
        self.norm = nn.BatchNorm2d(channels)

    def forward(self, x):
        return F.hardswish(self.norm(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
