"""3x3x3 Conv3d (no padding), a multiplication by a learned per-channel scale, then sigmoid.

The scale broadcasts over the three spatial axes; the valid conv shrinks the volume by 2.
"""

import torch
import torch.nn as nn

batch_size = 4
in_channels = 8
out_channels = 16
depth = 18
height = 18
width = 18


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, 3)
        self.scale = nn.Parameter(torch.rand(out_channels, 1, 1, 1) + 0.5)

    def forward(self, x):
        return torch.sigmoid(self.conv(x) * self.scale)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
