"""3x3x3 Conv3d with bias (padding 1) followed by ReLU on a small volume.

A five-dimensional conv: three spatial window loops around the channel reduction.
"""

import torch
import torch.nn as nn

batch_size = 4
in_channels = 8
out_channels = 16
depth = 16
height = 16
width = 16


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
