"""3x3x3 Conv3d with stride 2 and padding 1, downsampling a volume, followed by LeakyReLU.

Strided reads along three axes; the output has an eighth of the input's positions.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4
in_channels = 16
out_channels = 32
depth = 16
height = 32
width = 32


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, 3, stride=2, padding=1)

    def forward(self, x):
        return F.leaky_relu(self.conv(x), 0.2)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
