"""3x3 Conv2d, ReLU and a 2x2 MaxPool2d with stride 2.

A classic CNN stage: the pool reads a window of the activated conv output.
"""

import torch
import torch.nn as nn

batch_size = 8
in_channels = 16
out_channels = 32
height = 32
width = 32


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)

    def forward(self, x):
        return self.pool(torch.relu(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
