"""3x3x3 Conv3d followed by a 2x2x2 MaxPool3d with stride 2.

The pool reduces a 3-D window of the conv output, halving every spatial axis.
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
        self.pool = nn.MaxPool3d(kernel_size=2, stride=2)

    def forward(self, x):
        return self.pool(self.conv(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
