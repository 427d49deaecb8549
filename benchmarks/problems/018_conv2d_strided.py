"""3x3 Conv2d with stride 2 (a downsampling conv), bias and ReLU.

The stride halves the output size, so input windows overlap less and reads are strided.
"""

import torch
import torch.nn as nn

batch_size = 8
in_channels = 16
out_channels = 32
height = 56
width = 56


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, stride=2, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
