"""3x3 Conv2d with bias (padding 1) followed by ReLU.

The basic convolution epilogue: a per-channel bias and a max(0, x).
"""

import torch
import torch.nn as nn

batch_size = 8
in_channels = 16
out_channels = 32
height = 32
width = 32
kernel_size = 3


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
